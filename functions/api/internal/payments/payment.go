package payments

import (
	"context"
	"time"
)

// Status is the outcome of a charge, as stored with the payment.
type Status string

// Payment statuses.
const (
	// StatusSucceeded is a charged payment.
	StatusSucceeded Status = "succeeded"
	// StatusDeclined is a charge the card issuer refused; nothing was
	// charged.
	StatusDeclined Status = "declined"
)

// Payment is one charge attempt that reached an answer from the processor.
type Payment struct {
	// ID identifies the payment: "pay_" and 26 random base32 characters.
	ID string `json:"id"`
	// Amount is in the currency's minor units (cents), positive.
	Amount int64 `json:"amount"`
	// Currency is a three-letter upper-case code, such as EUR.
	Currency string `json:"currency"`
	// Source is the card token charged.
	Source string `json:"source"`
	// Status is StatusSucceeded or StatusDeclined.
	Status Status `json:"status"`
	// Created is when the payment was recorded, UTC, millisecond precision.
	Created time.Time `json:"created"`
	// Owner identifies the caller who made the payment: OwnerOf of the
	// caller's principal, never the principal in clear. Only that caller
	// can read or list the payment. It is not part of the API's answers.
	Owner string `json:"-"`
}

// Repository stores payments. Implementations must be safe for concurrent
// use.
type Repository interface {
	// Put stores a new payment. Payment IDs are unique; Put never
	// overwrites one. Storing a payment already stored with the same ID,
	// owner, amount, currency, source and status succeeds: that is a
	// retried write (an SDK retry after a lost reply, or a retry of the
	// request whose ID is derived from its claim), not a new payment. A
	// different payment under a taken ID is an error wrapping
	// ErrConflict. Put returns the payment as stored: p, or for a retried
	// write the row written first (its Created is the first attempt's), so
	// that every attempt at one request answers the same payment.
	Put(ctx context.Context, p Payment) (Payment, error)

	// Get returns the payment with id, or an error wrapping ErrNotFound.
	Get(ctx context.Context, id string) (Payment, error)

	// List returns up to limit payments of owner after the position
	// cursor ("" for the first page), and the cursor of the next page, ""
	// after the last one. Payments of other owners are never listed. Cursors are opaque and URL-safe; one List did not issue
	// is an error wrapping ErrInvalidCursor. A page may hold fewer than
	// limit payments, even none, while a next cursor remains.
	List(ctx context.Context, owner string, limit int, cursor string) (page []Payment, next string, err error)
}
