package gateway

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// Authorizer types of a Route, as an HTTP API's routes declare them.
const (
	// AuthNone is a route without an authorizer: the function gets no
	// requestContext.authorizer, whatever the request carries. An
	// Authorization header is passed on as a header, undecoded, as API
	// Gateway passes it.
	AuthNone = ""
	// AuthIAM is an AWS_IAM route: API Gateway refuses a request that is
	// not signed with SigV4 (403) and passes the caller's IAM identity in
	// requestContext.authorizer.iam.
	AuthIAM = "AWS_IAM"
	// AuthJWT is a route behind a JWT authorizer: a request without a
	// valid bearer token gets 401, and the token's claims are passed in
	// requestContext.authorizer.jwt.
	AuthJWT = "JWT"
)

// Auth is a route's authorizer. The zero value is AuthNone.
//
// Locally nothing is verified against AWS: a SigV4 signature is checked
// for its form, not its value, and the access key ID in its credential
// names the caller; a JWT's signature is not checked. What is mirrored is
// which routes refuse unauthenticated requests and what reaches the
// function: the claims or identity only on a route that declares the
// authorizer, so per-caller scoping works locally exactly where it works
// in AWS.
type Auth struct {
	// Type is AuthNone, AuthIAM or AuthJWT.
	Type string
	// Issuer is the issuer a JWT authorizer accepts: a token whose "iss"
	// claim differs gets 401. Empty accepts any.
	Issuer string
	// Audience lists the audiences a JWT authorizer accepts: a token
	// whose "aud" (or, without one, "client_id") names none of them gets
	// 401. Empty accepts any.
	Audience []string
}

// check reports whether a is a type the gateway emulates.
func (a Auth) check(routeKey string) error {
	switch a.Type {
	case AuthNone, AuthIAM, AuthJWT:
		return nil
	}
	return fmt.Errorf("%w: %q: authorizer type %q is not emulated (only AWS_IAM and JWT are)", ErrRoute, routeKey, a.Type)
}

// authorize applies rt's authorizer to r. It returns what the function
// gets as requestContext.authorizer (nil on a route without one), or the
// gateway's refusal.
func (g *Gateway) authorize(r *http.Request, rt *route, requestID string, now time.Time) (*events.APIGatewayV2HTTPRequestContextAuthorizerDescription, *response) {
	switch rt.auth.Type {
	case AuthIAM:
		iam, err := g.sigV4Identity(r.Header.Get("Authorization"))
		if err != nil {
			g.log.Printf("%s: %s: AWS_IAM: %v", requestID, rt.key, err)
			return nil, message(http.StatusForbidden, "Forbidden")
		}
		return &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{IAM: iam}, nil
	case AuthJWT:
		jwt, err := decodeJWT(r.Header.Get("Authorization"), now)
		if err == nil && jwt == nil {
			err = fmt.Errorf("%w: no bearer token", errJWT)
		}
		if err == nil {
			err = rt.auth.checkClaims(jwt.Claims)
		}
		if err != nil {
			g.log.Printf("%s: %s: JWT: %v", requestID, rt.key, err)
			return nil, message(http.StatusUnauthorized, "Unauthorized")
		}
		return &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{JWT: jwt}, nil
	}
	return nil, nil
}

// checkClaims checks a JWT's issuer and audience against a's.
func (a Auth) checkClaims(claims map[string]string) error {
	if a.Issuer != "" && claims["iss"] != a.Issuer {
		return fmt.Errorf("%w: issuer %q is not %q", errJWT, claims["iss"], a.Issuer)
	}
	if len(a.Audience) == 0 {
		return nil
	}
	aud, ok := claims["aud"]
	if !ok {
		aud = claims["client_id"]
	}
	for _, v := range strings.Fields(strings.Trim(aud, "[]")) {
		if slices.Contains(a.Audience, v) {
			return nil
		}
	}
	return fmt.Errorf("%w: audience %q is not one of %q", errJWT, aud, a.Audience)
}

// sigV4Identity reads the caller of a SigV4 Authorization header
// ("AWS4-HMAC-SHA256 Credential=AKID/20260101/us-east-1/execute-api/
// aws4_request, SignedHeaders=host;x-amz-date, Signature=...") and returns
// the identity an AWS_IAM route passes on. The signature is checked for
// its form only: locally the access key ID names the caller, as an IAM
// user of that name in the gateway's account.
func (g *Gateway) sigV4Identity(authorization string) (*events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription, error) {
	const algorithm = "AWS4-HMAC-SHA256 "
	if authorization == "" {
		return nil, fmt.Errorf("no Authorization header (sign the request with SigV4, e.g. curl --aws-sigv4 or awscurl)")
	}
	rest, ok := strings.CutPrefix(authorization, algorithm)
	if !ok {
		return nil, fmt.Errorf("the Authorization header is not a SigV4 signature (%s...)", strings.TrimSpace(algorithm))
	}
	fields := map[string]string{}
	for _, part := range strings.Split(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		fields[k] = v
	}
	cred := strings.Split(fields["Credential"], "/")
	switch {
	case len(cred) != 5 || cred[0] == "" || cred[4] != "aws4_request":
		return nil, fmt.Errorf("credential %q is not ACCESS_KEY/DATE/REGION/SERVICE/aws4_request", fields["Credential"])
	case cred[3] != "execute-api":
		return nil, fmt.Errorf("credential is scoped to service %q, not execute-api", cred[3])
	case !slices.Contains(strings.Split(fields["SignedHeaders"], ";"), "host"):
		return nil, fmt.Errorf("SignedHeaders %q does not include host", fields["SignedHeaders"])
	case fields["Signature"] == "" || strings.Trim(fields["Signature"], "0123456789abcdef") != "":
		return nil, fmt.Errorf("no hex Signature")
	}
	key := cred[0]
	return &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{
		AccessKey: key,
		AccountID: g.accountID,
		CallerID:  key,
		UserARN:   "arn:aws:iam::" + g.accountID + ":user/" + key,
		UserID:    key,
	}, nil
}
