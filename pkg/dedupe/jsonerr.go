package dedupe

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
)

// jsonError is an encoding/json error told without the data it was
// about: encoding/json's own messages quote a character of the input
// (SyntaxError), a number (UnmarshalTypeError, "number 300"), a value
// (UnsupportedValueError) or whatever a MarshalJSON method returned,
// and these errors reach logs, dead-letter queues and clients. The
// original stays reachable with errors.As.
type jsonError struct {
	msg string
	err error
}

func (e *jsonError) Error() string { return e.msg }
func (e *jsonError) Unwrap() error { return e.err }

// safeJSONError returns err as a jsonError.
func safeJSONError(err error) error {
	if err == nil {
		return nil
	}
	var (
		syntax    *json.SyntaxError
		typ       *json.UnmarshalTypeError
		value     *json.UnsupportedValueError
		unsupType *json.UnsupportedTypeError
		marshaler *json.MarshalerError
		invalid   *json.InvalidUnmarshalError
	)
	var msg string
	switch {
	case errors.As(err, &syntax):
		msg = fmt.Sprintf("not valid JSON at byte %d", syntax.Offset)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		msg = "not valid JSON: it ends too early"
	case errors.As(err, &typ):
		kind, _, _ := strings.Cut(typ.Value, " ") // "number 300": the kind only
		msg = fmt.Sprintf("a JSON %s cannot be decoded into %v", kind, typ.Type)
		if typ.Field != "" {
			msg += " (field " + typ.Field + ")"
		}
	case errors.As(err, &value):
		msg = "a value JSON cannot hold (NaN, an infinity, or a cycle)"
	case errors.As(err, &unsupType):
		msg = unsupType.Error() // names the type only
	case errors.As(err, &marshaler):
		msg = fmt.Sprintf("the JSON method of %v failed", marshaler.Type)
	case errors.As(err, &invalid):
		msg = invalid.Error() // names the type only
	default:
		msg = fmt.Sprintf("JSON failed (%T)", err)
	}
	return &jsonError{msg: msg, err: err}
}

// panicError is a recovered panic told without its value, which may hold
// anything (a result, an event): a runtime error's message is kept, as it
// names no data.
func panicError(what string, r any) error {
	if re, ok := r.(runtime.Error); ok {
		return fmt.Errorf("%s panicked: %s", what, re.Error())
	}
	return fmt.Errorf("%s panicked (a %T)", what, r)
}
