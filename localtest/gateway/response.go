package gateway

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// response is an HTTP response to write.
type response struct {
	status int
	header http.Header
	body   []byte
}

// errBadResponse means a function's result claimed to be a response object
// (it has statusCode) but is not a valid one. API Gateway answers 500.
var errBadResponse = errors.New("malformed Lambda proxy response")

// mapResult turns a function's result into the HTTP response an HTTP API
// sends with payload format 2.0:
//
//   - a JSON object with a statusCode field is a response object: status,
//     headers, cookies (one Set-Cookie each) and the body, base64-decoded
//     when isBase64Encoded is set. Payload format 2.0 has no
//     multiValueHeaders: like API Gateway, mapResult ignores them, and
//     reports their names in ignored so that the gateway can warn;
//   - anything else (any other JSON, even a string or invalid JSON) is the
//     body of a 200 response with content-type application/json, as API
//     Gateway infers.
func mapResult(result []byte) (resp *response, ignored []string, err error) {
	trimmed := bytes.TrimSpace(result)
	var probe map[string]json.RawMessage
	if len(trimmed) == 0 || trimmed[0] != '{' || json.Unmarshal(trimmed, &probe) != nil || probe["statusCode"] == nil {
		h := http.Header{}
		h.Set("Content-Type", "application/json")
		return &response{status: http.StatusOK, header: h, body: result}, nil, nil
	}
	var out struct {
		StatusCode        int                 `json:"statusCode"`
		Headers           map[string]string   `json:"headers"`
		MultiValueHeaders map[string][]string `json:"multiValueHeaders"`
		Body              *string             `json:"body"`
		IsBase64Encoded   bool                `json:"isBase64Encoded"`
		Cookies           []string            `json:"cookies"`
	}
	if err := json.Unmarshal(trimmed, &out); err != nil {
		return nil, nil, fmt.Errorf("%w: %v", errBadResponse, err)
	}
	if out.StatusCode < 100 || out.StatusCode > 599 {
		return nil, nil, fmt.Errorf("%w: statusCode %d", errBadResponse, out.StatusCode)
	}
	h := http.Header{}
	for _, name := range sortedKeys(out.Headers) {
		h.Add(name, out.Headers[name])
	}
	ignored = sortedKeys(out.MultiValueHeaders)
	for _, c := range out.Cookies {
		h.Add("Set-Cookie", c)
	}
	var body []byte
	if out.Body != nil {
		body = []byte(*out.Body)
		if out.IsBase64Encoded {
			b, err := base64.StdEncoding.DecodeString(*out.Body)
			if err != nil {
				return nil, nil, fmt.Errorf("%w: body is not base64: %v", errBadResponse, err)
			}
			body = b
		}
	}
	return &response{status: out.StatusCode, header: h, body: body}, ignored, nil
}

// message returns one of API Gateway's own answers, {"message": text}.
func message(status int, text string) *response {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	return &response{status: status, header: h, body: []byte(`{"message":"` + text + `"}`)}
}

// write sends resp; headers that API Gateway sets itself are kept from the
// function's response except hop-by-hop ones.
func (resp *response) write(w http.ResponseWriter, requestID string) {
	h := w.Header()
	for name, values := range resp.header {
		switch strings.ToLower(name) {
		case "content-length", "transfer-encoding", "connection":
			continue
		}
		h[http.CanonicalHeaderKey(name)] = append(h[http.CanonicalHeaderKey(name)], values...)
	}
	if _, ok := h["Content-Type"]; !ok {
		// API Gateway does not guess a type; keep net/http from sniffing.
		h["Content-Type"] = nil
	}
	h.Set("Apigw-Requestid", requestID)
	w.WriteHeader(resp.status)
	_, _ = w.Write(resp.body)
}
