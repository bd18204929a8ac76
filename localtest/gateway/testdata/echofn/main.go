// Command echofn is a tiny Lambda function used by the gateway and pool
// tests in place of the real functions. It answers an HTTP API (payload 2.0)
// event with a JSON body holding the event it got, its process id and
// selected environment variables. Query parameters steer it:
//
//	hold=PATH       first wait until the file PATH exists, polling, at most
//	                until the invocation's deadline: a test releases the
//	                invocation by creating the file
//	sleep=DURATION  sleep first (honours the invocation deadline: no)
//	panic=1         panic in the handler
//	error=1         return an error (a function error)
//	exit=1          exit the process mid-invocation (a crash)
//	raw=1           return the request body verbatim as the function's result
//	big=N           answer 200 with a body of N bytes ("x" repeated)
//	env=NAME        include os.Getenv(NAME) in the answer (repeatable)
//
// Any other event (no rawPath, e.g. a scheduled event) is answered with
// {"pid": PID, "event": EVENT}.
package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
)

type answer struct {
	PID   int               `json:"pid"`
	Event json.RawMessage   `json:"event"`
	Env   map[string]string `json:"env,omitempty"`
}

func handle(ctx context.Context, event json.RawMessage) (json.RawMessage, error) {
	var ev struct {
		RawPath         string `json:"rawPath"`
		RawQueryString  string `json:"rawQueryString"`
		Body            string `json:"body"`
		IsBase64Encoded bool   `json:"isBase64Encoded"`
	}
	_ = json.Unmarshal(event, &ev)
	a := answer{PID: os.Getpid(), Event: event}
	if ev.RawPath == "" {
		return json.Marshal(a)
	}
	q, _ := url.ParseQuery(ev.RawQueryString)
	if path := q.Get("hold"); path != "" {
		hold(ctx, path)
	}
	if d, err := time.ParseDuration(q.Get("sleep")); err == nil {
		time.Sleep(d)
	}
	switch {
	case q.Get("panic") != "":
		panic("echofn: asked to panic")
	case q.Get("error") != "":
		return nil, errors.New("echofn: asked to fail")
	case q.Get("exit") != "":
		fmt.Println("echofn: asked to exit")
		os.Exit(3)
	case q.Get("big") != "":
		n, _ := strconv.Atoi(q.Get("big"))
		return json.Marshal(map[string]any{"statusCode": 200, "body": strings.Repeat("x", n)})
	case q.Get("raw") != "":
		body := []byte(ev.Body)
		if ev.IsBase64Encoded {
			body, _ = base64.StdEncoding.DecodeString(ev.Body)
		}
		return body, nil
	}
	for _, name := range q["env"] {
		if a.Env == nil {
			a.Env = map[string]string{}
		}
		a.Env[name] = os.Getenv(name)
	}
	body, err := json.Marshal(a)
	if err != nil {
		return nil, err
	}
	return json.Marshal(map[string]any{
		"statusCode": 200,
		"headers":    map[string]string{"content-type": "application/json", "x-echo-pid": fmt.Sprint(os.Getpid())},
		"body":       string(body),
	})
}

// hold returns once the file at path exists or ctx ends.
func hold(ctx context.Context, path string) {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := os.Stat(path); err == nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func main() {
	fmt.Println("echofn: init pid", os.Getpid())
	lambda.Start(handle)
}
