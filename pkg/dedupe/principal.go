package dedupe

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strconv"

	"github.com/aws/aws-lambda-go/events"
)

// DefaultPrincipal is the default HTTPConfig.Principal. It derives the
// caller's identity from the event's request context. It accepts the
// adapters' events as pointers or values: *events.APIGatewayV2HTTPRequest,
// *events.APIGatewayProxyRequest, *events.LambdaFunctionURLRequest, or the
// same types without the pointer. JWT claims and authorizer contexts may
// be map[string]any, map[string]string or a JSON object in a string, as
// hand-built events and API Gateway's own encodings carry them.
//
// The rule is: when a request carries any authorizer identity or context,
// the principal is derived from it, never the shared scope. In order:
//
//   - a JWT (HTTP API JWT authorizer; REST API Cognito user pool
//     authorizer "claims"): its issuer with "sub", else with "client_id",
//     "azp" or "cid"; a token with none of them has no principal (its
//     other claims, such as "scope", are shared by many callers, and
//     "iat", "exp", "auth_time" or "nonce" change on every token);
//   - a Lambda authorizer context (HTTP API "lambda", REST API
//     authorizer map): every one of the identity fields "principalId",
//     "sub", "userId", "user_id", "username", "userName", "clientId",
//     "client_id", "tenantId", "tenant_id", "accountId", "account_id",
//     "orgId", "org_id", "organizationId", "customerId", "customer_id",
//     "email" and "uid" present in it, together ("principalId" and
//     "tenantId" both, if both are there) with a non-empty value; with
//     none of them, no principal: the other fields of a context ("role",
//     "plan", "authTime") are shared by many callers or change on every
//     request, and never enter a principal;
//   - IAM: the Cognito identity ID, else the user ARN, else the caller ID;
//     REST API keys: the API key ID.
//
// Each source is tagged ("jwt:", "lambda:", "iam:", ...) so identities
// from different authorizers never compare equal. DefaultPrincipal
// returns "" when the request carries no identity at all (no authorizer,
// an authorizer context that is empty, a Function URL with auth type
// NONE), and always for other types, *http.Request and
// events.ALBTargetGroupRequest included (ALB has no authorizer, and its
// x-amzn-oidc-* headers are anyone's to send unless verified: see
// HTTPConfig.ALBAuth). The adapters refuse such requests unless
// HTTPConfig.SharedScope is set.
//
// An authorizer whose context (or JWT) carries the caller's identity in a
// field not named above must name it: set HTTPConfig.Principal to
// PrincipalFields("accountNo"). Without it such requests have no
// principal and are refused exactly as requests without an authorizer.
func DefaultPrincipal(req any) string {
	switch r := req.(type) {
	case *events.APIGatewayV2HTTPRequest:
		return v2Principal(r.RequestContext.Authorizer)
	case events.APIGatewayV2HTTPRequest:
		return v2Principal(r.RequestContext.Authorizer)
	case *events.APIGatewayProxyRequest:
		return v1Principal(&r.RequestContext)
	case events.APIGatewayProxyRequest:
		return v1Principal(&r.RequestContext)
	case *events.LambdaFunctionURLRequest:
		return urlPrincipal(r.RequestContext.Authorizer)
	case events.LambdaFunctionURLRequest:
		return urlPrincipal(r.RequestContext.Authorizer)
	}
	return ""
}

// isIDField reports whether a Lambda authorizer context field is one
// DefaultPrincipal takes as the caller's identity (all of those present,
// together). The list is written out in DefaultPrincipal's documentation;
// keep the two in step.
func isIDField(name string) bool {
	switch name {
	case "principalId", "sub", "userId", "user_id", "username", "userName",
		"clientId", "client_id", "tenantId", "tenant_id", "accountId", "account_id",
		"orgId", "org_id", "organizationId", "customerId", "customer_id", "email", "uid":
		return true
	}
	return false
}

// jwtPrincipal is the principal of a JWT: issuer and subject, encoded
// unambiguously.
func jwtPrincipal(iss, sub string) string {
	return "jwt:" + strconv.Itoa(len(iss)) + ":" + iss + sub
}

// claimsPrincipal resolves a JWT's claims, of any of the shapes events
// carry them in (map[string]string, map[string]any, a JSON string, the
// last two through toMap), scalar reading one claim's value.
func claimsPrincipal[V any](claims map[string]V, scalar func(V) string) string {
	if len(claims) == 0 {
		return ""
	}
	iss := scalar(claims["iss"])
	if sub := scalar(claims["sub"]); sub != "" {
		return jwtPrincipal(iss, sub)
	}
	for _, name := range []string{"client_id", "azp", "cid"} {
		if id := scalar(claims[name]); id != "" {
			return "jwt-client:" + strconv.Itoa(len(iss)) + ":" + iss + id
		}
	}
	return "" // no identity claim: never identified by its other claims
}

// contextPrincipal resolves a Lambda authorizer context: the identity
// fields it holds with a non-empty value, else "". No other field ever
// enters a principal.
func contextPrincipal(ctx map[string]any) string {
	ids := make(map[string]any)
	for k, v := range ctx {
		if isIDField(k) && !emptyValue(v) {
			ids[k] = v
		}
	}
	switch {
	case len(ids) == 1 && scalar(ids["principalId"]) != "":
		return "lambda:" + scalar(ids["principalId"])
	case len(ids) == 1 && scalar(ids["sub"]) != "":
		return "lambda:" + scalar(ids["sub"])
	case len(ids) > 0:
		return "lambda-ids:" + canonicalHash(ids)
	}
	return ""
}

// emptyValue reports a context value that identifies no one: null, "",
// an empty object or list.
func emptyValue(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return x == ""
	case map[string]any:
		return len(x) == 0
	case []any:
		return len(x) == 0
	}
	return false
}

// scalar returns v as a string when it is one (or a number or bool, as
// authorizer contexts may hold), else "".
func scalar(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case float64, bool, int, int64, json.Number:
		b, _ := json.Marshal(x)
		return string(b)
	}
	return ""
}

// stringClaim is scalar for claims that are strings already (an HTTP
// API's JWT claims): the claim itself, without converting the map.
func stringClaim(v string) string { return v }

// canonicalHash returns the hex SHA-256 of v's canonical JSON (object
// members sorted, whitespace dropped), so the same context hashes the same
// whatever order its fields arrived in.
func canonicalHash(v any) string {
	b, err := json.Marshal(v) // sorts map keys at every level
	if err != nil {
		b = []byte(strconv.Quote(err.Error()))
	}
	if c, err := CanonicalJSON(b); err == nil {
		b = c
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// toMap turns a claims or context value into a map, whatever shape a
// hand-built or decoded event gave it.
func toMap(v any) map[string]any {
	switch m := v.(type) {
	case map[string]any:
		return m
	case map[string]string:
		out := make(map[string]any, len(m))
		for k, s := range m {
			out[k] = s
		}
		return out
	case string:
		var out map[string]any
		if json.Unmarshal([]byte(m), &out) == nil {
			return out
		}
	}
	return nil
}

// v2Principal resolves DefaultPrincipal for an HTTP API request.
func v2Principal(a *events.APIGatewayV2HTTPRequestContextAuthorizerDescription) string {
	if a == nil {
		return ""
	}
	if a.JWT != nil {
		if p := claimsPrincipal(a.JWT.Claims, stringClaim); p != "" {
			return p
		}
	}
	if p := contextPrincipal(a.Lambda); p != "" {
		return p
	}
	if iam := a.IAM; iam != nil {
		switch {
		case iam.CognitoIdentity.IdentityID != "":
			return "cognito-identity:" + iam.CognitoIdentity.IdentityID
		case iam.UserARN != "":
			return "iam:" + iam.UserARN
		case iam.CallerID != "":
			return "iam:" + iam.CallerID
		}
	}
	return ""
}

// v1Principal resolves DefaultPrincipal for a REST API request.
func v1Principal(rc *events.APIGatewayProxyRequestContext) string {
	if claims, ok := rc.Authorizer["claims"]; ok {
		if p := claimsPrincipal(toMap(claims), scalar); p != "" {
			return p
		}
	}
	if p := contextPrincipal(rc.Authorizer); p != "" {
		return p
	}
	id := &rc.Identity
	switch {
	case id.CognitoIdentityID != "":
		return "cognito-identity:" + id.CognitoIdentityID
	case id.UserArn != "":
		return "iam:" + id.UserArn
	case id.Caller != "":
		return "iam:" + id.Caller
	case id.APIKeyID != "":
		return "apikey:" + id.APIKeyID
	}
	return ""
}

// urlPrincipal resolves DefaultPrincipal for a Function URL request.
func urlPrincipal(a *events.LambdaFunctionURLRequestContextAuthorizerDescription) string {
	if a == nil || a.IAM == nil {
		return ""
	}
	switch {
	case a.IAM.UserARN != "":
		return "iam:" + a.IAM.UserARN
	case a.IAM.CallerID != "":
		return "iam:" + a.IAM.CallerID
	}
	return ""
}

// PrincipalFields returns an HTTPConfig.Principal that identifies the
// caller by the named fields of the request's Lambda authorizer context
// (HTTP API "lambda", REST API authorizer map) or JWT claims (HTTP API
// JWT authorizer, REST API Cognito "claims"), for authorizers that carry
// the identity in a field DefaultPrincipal does not know. Every named
// field must be present with a non-empty scalar value; otherwise the
// request has no principal and is refused (ErrNoPrincipal), exactly as
// without an authorizer. Name only fields that identify a caller, never
// one that many callers share ("role", "plan") or one that changes on
// every request ("authTime", "iat", a nonce). It returns "" for other
// event types, *http.Request included.
//
// PrincipalFields panics when no field is named.
func PrincipalFields(fields ...string) func(req any) string {
	if len(fields) == 0 {
		panic("dedupe: PrincipalFields needs at least one field name")
	}
	fields = slices.Clone(fields)
	return func(req any) string {
		for _, src := range authorizerMaps(req) {
			var b []byte
			ok := true
			for _, f := range fields {
				v := scalar(src[f])
				if v == "" {
					ok = false
					break
				}
				b = strconv.AppendQuote(strconv.AppendQuote(b, f), v)
			}
			if ok {
				return "fields:" + sumHex(b)
			}
		}
		return ""
	}
}

// authorizerMaps returns the authorizer contexts and JWT claims a request
// carries, in the order PrincipalFields looks at them.
func authorizerMaps(req any) []map[string]any {
	var out []map[string]any
	add := func(m map[string]any) {
		if len(m) > 0 {
			out = append(out, m)
		}
	}
	switch r := req.(type) {
	case events.APIGatewayV2HTTPRequest:
		return authorizerMaps(&r)
	case events.APIGatewayProxyRequest:
		return authorizerMaps(&r)
	case *events.APIGatewayV2HTTPRequest:
		if a := r.RequestContext.Authorizer; a != nil {
			add(a.Lambda)
			if a.JWT != nil {
				add(toMap(a.JWT.Claims))
			}
		}
	case *events.APIGatewayProxyRequest:
		add(r.RequestContext.Authorizer)
		add(toMap(r.RequestContext.Authorizer["claims"]))
	}
	return out
}
