package payments

import "errors"

// Sentinel errors of the payments package. Check them with errors.Is.
var (
	// ErrNotFound reports that no payment has the requested ID.
	ErrNotFound = errors.New("payments: payment not found")

	// ErrInvalidSource reports a card source the processor does not know.
	ErrInvalidSource = errors.New("payments: no such source")

	// ErrProcessor reports that the card processor failed to answer. The
	// card was not charged.
	ErrProcessor = errors.New("payments: processor error")

	// ErrInvalidCursor reports a pagination token that List did not issue.
	ErrInvalidCursor = errors.New("payments: invalid pagination token")

	// ErrConflict reports that Put found a different payment under the
	// payment's ID.
	ErrConflict = errors.New("payments: another payment has this ID")

	// ErrInvalidConfig reports a Config that New cannot use.
	ErrInvalidConfig = errors.New("payments: invalid config")
)
