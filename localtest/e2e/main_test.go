package e2e

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/lambda-dedupe/dedupe/infra"
	"github.com/lambda-dedupe/dedupe/localtest/dynalite"
	"github.com/lambda-dedupe/dedupe/localtest/gateway"
)

// The stack TestMain starts, shared by every test. Tests run one after the
// other (none calls t.Parallel): some stop dynalite or count environments.
var (
	skipReason string           // why the stack did not start, when it did not
	db         *dynalite.Server // the DynamoDB endpoint
	tables     []infra.Table    // the template's tables, to recreate them
	stack      *gateway.Stack   // the functions and the gateway
	baseURL    string           // the gateway, http://127.0.0.1:PORT
	output     = &logBuffer{}   // the functions' and the gateway's output

	// What the stack was built from, for tests that start a stack of
	// their own (the chaos run, on a DynamoDB endpoint it restarts).
	functions    []infra.Function
	bootstrapDir string
	riePath      string
)

// maxConcurrency is the environments per function. Requests beyond it wait
// (queueTimeout) instead of being throttled, so that 200 concurrent
// requests all reach the function on a 2-core machine.
const (
	maxConcurrency = 16
	queueTimeout   = 60 * time.Second
)

func TestMain(m *testing.M) {
	flag.Parse()
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		if output.Len() > 0 {
			fmt.Fprintf(os.Stderr, "output:\n%s", output)
		}
		code = 1
	}
	os.Exit(code)
}

// run starts the stack, runs the tests and stops the stack.
func run(m *testing.M) (int, error) {
	if testing.Short() {
		skipReason = "-short: the end-to-end stack is not started"
		return m.Run(), nil
	}
	// No deadline of its own: the builds and the servers' starts take what
	// they take on a busy machine (each start has its own generous limit),
	// and go test's -timeout bounds the whole run.
	ctx := context.Background()
	root, err := infra.ModuleRoot()
	if err != nil {
		return 0, err
	}
	if _, err := os.Stat(filepath.Join(root, "localtest", "node_modules", ".bin", "dynalite")); err != nil {
		if os.Getenv(dynalite.EnvCI) != "" {
			return 0, fmt.Errorf("dynalite is not installed (run `npm ci --prefix localtest`): %v", err)
		}
		skipReason = "dynalite is not installed: run `npm ci --prefix localtest`"
		return m.Run(), nil
	}

	tplPath, err := infra.FindTemplate()
	if err != nil {
		return 0, err
	}
	tpl, err := infra.Load(tplPath)
	if err != nil {
		return 0, err
	}
	fns, err := infra.Functions(tpl)
	if err != nil {
		return 0, err
	}
	if tables, err = infra.Tables(tpl); err != nil {
		return 0, err
	}

	// The emulator (cached under build/bin, static as `make rie` builds it)
	// and the bootstraps, built for this machine in this test binary's
	// flavour (gateway.BuildBootstrap): under make test, with -race.
	start := time.Now()
	rie := filepath.Join(root, "build", "bin", "aws-lambda-rie")
	if _, err := gateway.BuildRIE(ctx, root, rie); err != nil {
		return 0, err
	}
	dir, err := os.MkdirTemp("", "e2e-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	var wg sync.WaitGroup
	errs := make(chan error, len(fns))
	for _, f := range fns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := gateway.BootstrapName(f.LogicalID)
			if err := gateway.BuildBootstrap(ctx, root, "./functions/"+name, filepath.Join(dir, name, "bootstrap")); err != nil {
				errs <- fmt.Errorf("build %s: %w", f.LogicalID, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		return 0, err
	}
	log.Printf("e2e: built emulator and %d bootstraps in %v", len(fns), time.Since(start).Round(time.Millisecond))
	functions, bootstrapDir, riePath = fns, dir, rie

	if db, err = dynalite.Start(ctx, dynalite.Options{}); err != nil {
		return 0, err
	}
	defer db.Stop()
	if err := createTables(ctx); err != nil {
		return 0, err
	}

	stack, err = gateway.NewStack(gateway.StackConfig{
		Functions:    fns,
		BootstrapDir: dir,
		RIE:          rie,
		Env: map[string]string{
			dynalite.EnvEndpoint: db.Endpoint(),
			// Let the reaper clear a record as soon as its lease is out, so
			// that the timeout test sees it act (the template's 30s grace
			// would outlast the test).
			"REAPER_GRACE": "1ms",
		},
		MaxConcurrency: maxConcurrency,
		QueueTimeout:   queueTimeout,
		Output:         output,
		Logger:         log.New(output, "", log.Lmicroseconds),
	})
	if err != nil {
		return 0, err
	}
	defer stack.Close()
	srv := httptest.NewServer(stack.Gateway)
	defer srv.Close()
	baseURL = srv.URL
	code := m.Run()
	for _, name := range []string{"ApiFunction", "ReaperFunction"} {
		if p := stack.Pool(name); p != nil {
			s := p.Stats()
			avg := time.Duration(0)
			if s.ColdStarts > 0 {
				avg = s.ColdStartTotal / time.Duration(s.ColdStarts)
			}
			log.Printf("e2e: %s: %d environments started (peak %d busy), %d invocations, %d replaced, %d throttled; cold start avg %v, max %v",
				name, s.Started, s.PeakBusy, s.Invocations, s.Replaced, s.Throttled, avg.Round(time.Millisecond), s.ColdStartMax.Round(time.Millisecond))
		}
	}
	return code, nil
}

// dynamoClient returns a client of dynalite.
func dynamoClient() *dynamodb.Client { return dynamoClientOf(db.Endpoint()) }

// dynamoClientOf returns a client of the DynamoDB endpoint at url.
func dynamoClientOf(url string) *dynamodb.Client {
	return dynamodb.NewFromConfig(aws.Config{
		Region: gateway.DefaultRegion,
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "local", SecretAccessKey: "local"}, nil
		}),
	}, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(url) })
}

// createTables creates the template's tables on dynalite.
func createTables(ctx context.Context) error {
	_, err := infra.EnsureTables(ctx, dynamoClient(), tables)
	return err
}

// tableName returns the local name of the template's table logicalID.
func tableName(logicalID string) string {
	for _, t := range tables {
		if t.LogicalID == logicalID {
			return aws.ToString(t.Input.TableName)
		}
	}
	return logicalID
}

// needStack skips the test when TestMain did not start the stack, and
// prints the stack's output from the test's start when it fails.
func needStack(t *testing.T) {
	t.Helper()
	if skipReason != "" {
		t.Skip(skipReason)
	}
	mark := output.Len()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("stack output during the test:\n%s", output.Since(mark))
		}
	})
}

// logBuffer is an io.Writer that keeps everything written to it.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Len()
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Since returns what was written after the first n bytes.
func (b *logBuffer) Since(n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf.Bytes()[min(n, b.buf.Len()):])
}

var _ io.Writer = (*logBuffer)(nil)
