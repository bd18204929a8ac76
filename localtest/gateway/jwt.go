package gateway

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// errJWT is why a bearer token was refused; the client gets a bare 401.
var errJWT = errors.New("not a JWT")

// decodeJWT decodes the claims of a bearer token in the Authorization
// header, as an HTTP API JWT authorizer passes them on: every claim as a
// string (strings as they are, arrays as "[a b]", other values as JSON) and
// the scopes from the scope (space-separated) or scp claim. The signature is
// NOT verified. A token whose exp lies before now is refused, as the
// authorizer would. It returns nil, nil when the header holds no bearer
// token.
func decodeJWT(authorization string, now time.Time) (*events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription, error) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(authorization), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return nil, nil
	}
	parts := strings.Split(strings.TrimSpace(token), ".")
	if len(parts) != 3 {
		return nil, fmt.Errorf("%w: %d parts", errJWT, len(parts))
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return nil, fmt.Errorf("%w: payload: %v", errJWT, err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(payload, &raw); err != nil {
		return nil, fmt.Errorf("%w: payload: %v", errJWT, err)
	}
	desc := &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: make(map[string]string, len(raw))}
	for name, v := range raw {
		desc.Claims[name] = claimString(v)
	}
	if exp, ok := raw["exp"]; ok {
		sec, err := strconv.ParseFloat(string(exp), 64)
		if err != nil {
			return nil, fmt.Errorf("%w: exp: %v", errJWT, err)
		}
		if time.UnixMilli(int64(sec * 1000)).Before(now) {
			return nil, fmt.Errorf("%w: expired at %s", errJWT, time.Unix(int64(sec), 0).UTC().Format(time.RFC3339))
		}
	}
	var scope string
	if json.Unmarshal(raw["scope"], &scope) == nil && scope != "" {
		desc.Scopes = strings.Fields(scope)
	} else if v, ok := raw["scp"]; ok {
		var list []string
		if json.Unmarshal(v, &list) == nil {
			desc.Scopes = list
		} else if json.Unmarshal(v, &scope) == nil {
			desc.Scopes = strings.Fields(scope)
		}
	}
	return desc, nil
}

// claimString renders one claim value the way the JWT authorizer does.
func claimString(v json.RawMessage) string {
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s
	}
	var list []json.RawMessage
	if json.Unmarshal(v, &list) == nil {
		items := make([]string, len(list))
		for i, item := range list {
			items[i] = claimString(item)
		}
		return "[" + strings.Join(items, " ") + "]"
	}
	return string(v)
}
