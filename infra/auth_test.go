package infra_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/lambda-dedupe/dedupe/infra"
)

// TestRouteAuth: each HttpApi route's authorizer is resolved as SAM
// resolves it (the event's Auth, else its API's DefaultAuthorizer, else
// Globals.HttpApi's), which is what the local gateway enforces.
func TestRouteAuth(t *testing.T) {
	tpl, err := infra.Load(filepath.Join("testdata", "auth.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	fns, err := infra.Functions(tpl)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]infra.RouteAuth{}
	for _, r := range fns[0].Routes {
		got[r.RouteKey()] = r.Auth
	}
	want := map[string]infra.RouteAuth{
		"POST /iam":    {Name: "AWS_IAM", Type: infra.AuthIAM},
		"GET /health":  {},
		"POST /orders": {Name: "Partners", Type: infra.AuthJWT, Issuer: "https://issuer.example", Audience: []string{"partners"}},
		"GET /status":  {},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

// TestRouteAuthRefused: an authorizer the API does not declare, or
// AWS_IAM without EnableIamAuthorizer, is an error, never an open route.
func TestRouteAuthRefused(t *testing.T) {
	tests := []struct{ name, globals, event, want string }{
		{"IAM not enabled", "DefaultAuthorizer: AWS_IAM", "", "EnableIamAuthorizer"},
		{"unknown authorizer", "EnableIamAuthorizer: true", "Auth: {Authorizer: Nope}", `"Nope" is not declared`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := `Transform: AWS::Serverless-2016-10-31
Globals:
  HttpApi:
    Auth: {` + tt.globals + `}
Resources:
  Fn:
    Type: AWS::Serverless::Function
    Properties:
      CodeUri: s3://bucket/fn.zip
      Events:
        E:
          Type: HttpApi
          Properties: {Method: GET, Path: /x` + map[bool]string{true: ", " + tt.event, false: ""}[tt.event != ""] + `}
`
			path := filepath.Join(t.TempDir(), "t.yaml")
			if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
				t.Fatal(err)
			}
			tpl, err := infra.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := infra.Functions(tpl); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error about %s", err, tt.want)
			}
		})
	}
}
