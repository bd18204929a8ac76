package rehearsal

import (
	"fmt"
	"slices"
	"strings"

	"github.com/lambda-dedupe/dedupe/infra"
)

// checkAuth checks that the transformed template puts every HttpApi route
// behind the authorizer the template declares for it, as API Gateway will
// enforce it: each route's OpenAPI operation names the authorizer in its
// security, and the AWS_IAM scheme is SigV4. moto does not create the HTTP
// API of a stack (see the gap recorded for it), so no request can be sent
// to show a refusal here; this is as far as an emulator can show that the
// deployed demo refuses unauthenticated callers. The local gateway
// enforces the same declarations (localtest/gateway).
func (r *rehearsal) checkAuth() {
	body := nested(r.doc, "Resources", "ServerlessHttpApi", "Properties", "Body")
	if body == nil {
		r.report.that("HTTP API OpenAPI body", false, "no ServerlessHttpApi body", "the implicit HTTP API")
		return
	}
	for _, fn := range r.fns {
		for _, rt := range fn.Routes {
			method := strings.ToLower(rt.Method)
			if method == "any" {
				method = "x-amazon-apigateway-any-method"
			}
			op, _ := nested(body, "paths", rt.Path, method).(map[string]any)
			var names []string
			if list, ok := op["security"].([]any); ok {
				for _, s := range list {
					if m, ok := s.(map[string]any); ok {
						for k := range m {
							names = append(names, k)
						}
					}
				}
			}
			slices.Sort(names)
			want := []string{}
			if rt.Auth.Name != "" {
				want = []string{rt.Auth.Name}
			}
			if names == nil {
				names = []string{}
			}
			r.report.eq(fmt.Sprintf("%s route %s authorizer", fn.LogicalID, rt.RouteKey()), names, want)
			if rt.Auth.Type == "" {
				r.report.that(fmt.Sprintf("%s route %s authenticated", fn.LogicalID, rt.RouteKey()), false, "open to anyone", "an authorizer")
			}
			if rt.Auth.Type == infra.AuthIAM {
				scheme := nested(body, "components", "securitySchemes", rt.Auth.Name, "x-amazon-apigateway-authtype")
				r.report.eq(fmt.Sprintf("%s route %s signature", fn.LogicalID, rt.RouteKey()), scheme, "awsSigv4")
			}
		}
	}
}

// nested walks a decoded JSON document by keys; nil when a key is missing.
func nested(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}
