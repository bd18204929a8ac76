package payments

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/lambda-dedupe/dedupe/pkg/dedupe"
)

// Route keys of the API, as the template's HttpApi events declare them.
const (
	RouteCreate = "POST /payments"
	RouteGet    = "GET /payments/{id}"
	RouteList   = "GET /payments"
)

// Pagination limits of GET /payments.
const (
	DefaultPageSize = 50
	MaxPageSize     = 100
)

// MaxAmount is the largest amount POST /payments accepts, in minor units:
// twelve digits, well inside the integers JSON clients represent exactly.
const MaxAmount = 999_999_999_999

// Problem types of the API's own error answers (the idempotency answers
// are dedupe's Problem* types).
const (
	ProblemInvalidRequest = "tag:lambda-dedupe.github.io,2025:payments/invalid-request"
	ProblemCardDeclined   = "tag:lambda-dedupe.github.io,2025:payments/card-declined"
	ProblemProcessor      = "tag:lambda-dedupe.github.io,2025:payments/processor-error"
	ProblemNotFound       = "tag:lambda-dedupe.github.io,2025:payments/not-found"
	ProblemUnavailable    = "tag:lambda-dedupe.github.io,2025:payments/unavailable"
	ProblemNotRecorded    = "tag:lambda-dedupe.github.io,2025:payments/not-recorded"
	ProblemNoIdentity     = "tag:lambda-dedupe.github.io,2025:payments/no-caller-identity"
)

// Config configures an API. Repository is required; every other zero
// field means its default.
type Config struct {
	// Repository stores the payments. Required.
	Repository Repository
	// Processor charges cards. Nil means a zero SimulatedProcessor.
	Processor Processor
	// Now is the clock for Payment.Created. Nil means time.Now.
	Now func() time.Time
	// NewID returns a fresh payment ID. Nil means "pay_" + rand.Text().
	NewID func() string
	// Logger logs every charge and failure. Nil means no logging.
	Logger *slog.Logger
}

// API serves the payments routes. Create it with New.
type API struct {
	repo      Repository
	processor Processor
	now       func() time.Time
	newID     func() string
	log       *slog.Logger
}

// New returns the API for cfg.
func New(cfg Config) (*API, error) {
	if cfg.Repository == nil {
		return nil, fmt.Errorf("%w: Repository is required", ErrInvalidConfig)
	}
	a := &API{repo: cfg.Repository, processor: cfg.Processor, now: cfg.Now, newID: cfg.NewID, log: cfg.Logger}
	if a.processor == nil {
		a.processor = &SimulatedProcessor{}
	}
	if a.now == nil {
		a.now = time.Now
	}
	if a.newID == nil {
		a.newID = func() string { return "pay_" + rand.Text() }
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	return a, nil
}

// Handler returns the Lambda handler: the routes behind dedupe.HTTPAPI, so
// that POST /payments requires an Idempotency-Key and runs once per key.
// The GET routes are safe methods, which pass through unguarded.
//
// Keys are scoped by the caller the route's authorizer identified (the
// template declares AWS_IAM on every route), and so are payments: a caller
// reads and lists only its own. A request with no caller identity is
// refused with 500 (by the guard on POST, by Serve on the GET routes): it
// means the API was deployed without its authorizer, and anonymous callers
// must not share one key space or one list of payments.
func (a *API) Handler(g *dedupe.Guard) func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	return dedupe.HTTPAPI(g, &dedupe.HTTPConfig{
		RequireKey: dedupe.RequireKeyOn(RouteCreate),
		Logger:     a.log,
	}, a.Serve)
}

// OwnerOf returns the Payment.Owner of a caller whose principal (as
// dedupe.DefaultPrincipal derives it) is principal: "own_" and 32 hex
// digits of its SHA-256, so the table never holds an identity in clear.
// It returns "" for the empty principal, which owns nothing.
func OwnerOf(principal string) string {
	if principal == "" {
		return ""
	}
	sum := sha256.Sum256([]byte("payments-owner:" + principal))
	return "own_" + hex.EncodeToString(sum[:16])
}

// Serve answers one request, without idempotency: Handler wraps it.
func (a *API) Serve(ctx context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	owner := OwnerOf(dedupe.DefaultPrincipal(&req))
	if owner == "" {
		a.log.Error("payments: request without a caller identity refused: deploy the API behind its authorizer", "route", req.RouteKey)
		return problem(http.StatusInternalServerError, ProblemNoIdentity, "No caller identity",
			"The request carries no caller identity.", nil), nil
	}
	switch req.RouteKey {
	case RouteCreate:
		return a.create(ctx, owner, req)
	case RouteGet:
		return a.get(ctx, owner, req.PathParameters["id"])
	case RouteList:
		return a.list(ctx, owner, req.QueryStringParameters)
	}
	return problem(http.StatusNotFound, ProblemNotFound, "Not found", "No such route.", nil), nil
}

// chargeRequest is the body of POST /payments.
type chargeRequest struct {
	// Amount stays raw: json.Number would also accept the string "12".
	Amount   json.RawMessage `json:"amount"`
	Currency string          `json:"currency"`
	Source   string          `json:"source"`
}

// FieldError is one reason a request was refused, in a 400 problem's
// "errors" member.
type FieldError struct {
	Field  string `json:"field"`
	Reason string `json:"reason"`
}

func (a *API) create(ctx context.Context, owner string, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	amount, currency, source, errs := parseCharge(req.Body, req.IsBase64Encoded)
	if len(errs) > 0 {
		return problem(http.StatusBadRequest, ProblemInvalidRequest, "Invalid payment request",
			"The request body is not a valid payment; see errors.", map[string]any{"errors": errs}), nil
	}

	// The processor deduplicates too, on a key derived from the claim:
	// a retry after a charge whose payment was not recorded is answered
	// by the processor, not charged twice. Unguarded requests have none.
	var processorKey string
	if c, ok := dedupe.ClaimFrom(ctx); ok {
		processorKey = c.DownstreamKey()
	}
	status, err := a.processor.Charge(ctx, amount, currency, source, processorKey)
	switch {
	case errors.Is(err, ErrInvalidSource):
		return problem(http.StatusBadRequest, ProblemInvalidRequest, "Invalid payment request",
			"The request body is not a valid payment; see errors.",
			map[string]any{"errors": []FieldError{{"source", "no such card token"}}}), nil
	case err != nil:
		a.log.Warn("payments: charge failed", "amount", amount, "currency", currency, "source", source, "err", err)
		return problem(http.StatusBadGateway, ProblemProcessor, "Card processor error",
			"The card processor did not answer; nothing was charged. Retry the request.", nil), nil
	}

	// A guarded request's payment ID comes from its claim's downstream
	// key, which names this request's life (the same across its retries
	// and takeovers, another once the key's record has expired and the key
	// starts over), so that every attempt at this request writes the same
	// row: a write that was applied but answered with an error (a lost
	// reply, an outage) is found again by the retry instead of becoming a
	// second payment.
	id := a.newID()
	if processorKey != "" {
		sum := sha256.Sum256([]byte("payment-id:" + processorKey))
		id = "pay_" + base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:16])
	}
	p := Payment{
		ID:       id,
		Amount:   amount,
		Currency: currency,
		Source:   source,
		Status:   status,
		Created:  a.now().UTC().Truncate(time.Millisecond),
		Owner:    owner,
	}
	// A payment that was not recorded is never answered 201: the client
	// would be told of a payment that GET /payments/{id} cannot show. The
	// 5xx releases the idempotency key; the retry of this request charges
	// again under the same processor key, which the processor answers
	// with the first charge (nothing is charged twice), and writes the
	// same row.
	stored, err := a.repo.Put(ctx, p)
	switch {
	case errors.Is(err, ErrConflict):
		a.log.Error("payments: payment not recorded: another payment has its ID",
			"id", p.ID, "amount", p.Amount, "currency", p.Currency, "status", p.Status, "err", err)
		return problem(http.StatusInternalServerError, ProblemNotRecorded, "Payment not recorded",
			"The payment could not be recorded.", nil), nil
	case err != nil:
		a.log.Error("payments: record payment failed", "id", p.ID, "status", p.Status, "err", err)
		return unavailable(), nil
	}
	// A retried write answers the row written first, so every attempt at
	// this request answers the same payment, byte for byte.
	p = stored
	a.log.Info("payments: charge", "id", p.ID, "amount", p.Amount, "currency", p.Currency, "status", p.Status)

	if status == StatusDeclined {
		return problem(http.StatusPaymentRequired, ProblemCardDeclined, "Card declined",
			"The card issuer declined the charge; nothing was charged.", map[string]any{"payment": p}), nil
	}
	resp := jsonResponse(http.StatusCreated, p)
	resp.Headers["Location"] = "/payments/" + p.ID
	return resp, nil
}

// parseCharge decodes and validates a POST /payments body.
func parseCharge(body string, isBase64 bool) (amount int64, currency, source string, errs []FieldError) {
	raw := []byte(body)
	if isBase64 {
		var err error
		if raw, err = base64.StdEncoding.DecodeString(body); err != nil {
			return 0, "", "", []FieldError{{"body", "not valid base64"}}
		}
	}
	if errs := checkFieldNames(raw); len(errs) > 0 {
		return 0, "", "", errs
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var c chargeRequest
	if err := dec.Decode(&c); err != nil {
		return 0, "", "", []FieldError{decodeError(err)}
	}
	if _, err := dec.Token(); err != io.EOF {
		return 0, "", "", []FieldError{{"body", "must be one JSON object"}}
	}

	switch n, err := strconv.ParseInt(string(c.Amount), 10, 64); {
	case len(c.Amount) == 0 || string(c.Amount) == "null":
		errs = append(errs, FieldError{"amount", "is required"})
	case err != nil || n < 1 || n > MaxAmount:
		errs = append(errs, FieldError{"amount", fmt.Sprintf("must be a whole number of minor units from 1 to %d", MaxAmount)})
	default:
		amount = n
	}
	switch {
	case c.Currency == "":
		errs = append(errs, FieldError{"currency", "is required"})
	case !isCurrency(c.Currency):
		errs = append(errs, FieldError{"currency", "must be a three-letter code such as EUR"})
	default:
		currency = strings.ToUpper(c.Currency)
	}
	switch {
	case c.Source == "":
		errs = append(errs, FieldError{"source", "is required"})
	case len(c.Source) > 64:
		errs = append(errs, FieldError{"source", "must be at most 64 characters"})
	default:
		source = c.Source
	}
	return amount, currency, source, errs
}

// chargeFields are the field names of a POST /payments body, exactly as
// they must be written.
var chargeFields = [...]string{"amount", "currency", "source"}

// checkFieldNames refuses field names that encoding/json would accept
// silently but that a validator or a WAF in front of the API reads
// differently: a field that appears twice, or a name that differs from a
// known field only in case ("AMOUNT", or "ſource" with U+017F, which
// folds to s). encoding/json matches names without
// regard to case, and the last match wins, so {"amount":1,
// "AMOUNT":999999999999} would charge 999999999999 where a check in
// front saw 1. A body that is not a JSON object is left to the decoder.
func checkFieldNames(raw []byte) []FieldError {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	seen := map[string]bool{}
	var errs []FieldError
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		name, _ := tok.(string)
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil
		}
		for _, f := range chargeFields {
			switch {
			case name == f && seen[f]:
				errs = append(errs, FieldError{f, "appears more than once; write each field once"})
			case name == f:
				seen[f] = true
			case strings.EqualFold(name, f):
				errs = append(errs, FieldError{f, fmt.Sprintf("is written in another case; field names are case-sensitive: write %q", f)})
			}
		}
	}
	return errs
}

// decodeError describes a JSON decoding error without echoing the input.
func decodeError(err error) FieldError {
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.As(err, &typeErr) && typeErr.Field != "":
		return FieldError{typeErr.Field, "has the wrong type"}
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return FieldError{strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`), "is not a known field"}
	case errors.Is(err, io.EOF):
		return FieldError{"body", "is empty"}
	}
	return FieldError{"body", "is not a valid JSON object"}
}

func isCurrency(s string) bool {
	if len(s) != 3 {
		return false
	}
	for i := 0; i < 3; i++ {
		if c := s[i] | 0x20; c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}

func (a *API) get(ctx context.Context, owner, id string) (events.APIGatewayV2HTTPResponse, error) {
	p, err := a.repo.Get(ctx, id)
	switch {
	// Another caller's payment is not found: its existence is not told.
	case errors.Is(err, ErrNotFound), err == nil && p.Owner != owner:
		return problem(http.StatusNotFound, ProblemNotFound, "Payment not found", "No payment has this ID.", nil), nil
	case err != nil:
		a.log.Error("payments: get failed", "id", id, "err", err)
		return unavailable(), nil
	}
	return jsonResponse(http.StatusOK, p), nil
}

// page is the body of GET /payments.
type page struct {
	Payments []Payment `json:"payments"`
	// Next is the value of ?next= for the following page, absent on the
	// last page.
	Next string `json:"next,omitempty"`
}

func (a *API) list(ctx context.Context, owner string, query map[string]string) (events.APIGatewayV2HTTPResponse, error) {
	limit := DefaultPageSize
	if v, ok := query["limit"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxPageSize {
			return problem(http.StatusBadRequest, ProblemInvalidRequest, "Invalid query", "See errors.",
				map[string]any{"errors": []FieldError{{"limit", fmt.Sprintf("must be a whole number from 1 to %d", MaxPageSize)}}}), nil
		}
		limit = n
	}
	payments, next, err := a.repo.List(ctx, owner, limit, query["next"])
	switch {
	case errors.Is(err, ErrInvalidCursor):
		return problem(http.StatusBadRequest, ProblemInvalidRequest, "Invalid query", "See errors.",
			map[string]any{"errors": []FieldError{{"next", "is not a token this API issued"}}}), nil
	case err != nil:
		a.log.Error("payments: list failed", "err", err)
		return unavailable(), nil
	}
	if payments == nil {
		payments = []Payment{}
	}
	return jsonResponse(http.StatusOK, page{Payments: payments, Next: next}), nil
}

// jsonResponse answers status with v as JSON.
func jsonResponse(status int, v any) events.APIGatewayV2HTTPResponse {
	body, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("payments: encode response: %v", err)) // only plain types are encoded
	}
	return events.APIGatewayV2HTTPResponse{
		StatusCode: status,
		Headers:    map[string]string{"Content-Type": "application/json"},
		Body:       string(body),
	}
}

// problem answers an RFC 9457 problem with optional extension members.
func problem(status int, typ, title, detail string, ext map[string]any) events.APIGatewayV2HTTPResponse {
	members := map[string]any{"type": typ, "title": title, "status": status, "detail": detail}
	for k, v := range ext {
		members[k] = v
	}
	resp := jsonResponse(status, members)
	resp.Headers["Content-Type"] = dedupe.ProblemContentType
	return resp
}

// unavailable is the answer when the payments table fails: a 503, which
// releases the idempotency key so the client's retry runs again.
func unavailable() events.APIGatewayV2HTTPResponse {
	resp := problem(http.StatusServiceUnavailable, ProblemUnavailable, "Service temporarily unavailable",
		"Payments could not be read or recorded. Retry after the number of seconds in Retry-After.", nil)
	resp.Headers["Retry-After"] = "1"
	return resp
}
