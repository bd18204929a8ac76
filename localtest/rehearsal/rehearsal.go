package rehearsal

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cfntypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatchlogs"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/lambda-dedupe/dedupe/infra"
)

// DefaultRegion is the region of the rehearsal when [Options.Region] is
// empty.
const DefaultRegion = "us-east-1"

// stackTimeout bounds the wait for a stack operation. moto applies them
// synchronously; the bound only turns a hang into an error.
const stackTimeout = 2 * time.Minute

// Options configures [Run].
type Options struct {
	// Endpoint is the URL of a running moto_server, the endpoint of every
	// service the rehearsal calls. Required; it must be a throwaway
	// server, as the rehearsal creates a bucket and a stack on it.
	Endpoint string

	// Root is the module root, where template.yaml, samconfig.toml and the
	// Makefile are. Empty means infra.ModuleRoot.
	Root string

	// WorkDir receives the build artifacts. Empty means a temporary
	// directory, removed when Run returns.
	WorkDir string

	// Region is the stack's region. Empty means DefaultRegion.
	Region string

	// Update holds the parameter values of the update step. Nil means
	// LogLevel=DEBUG and LogRetentionDays=30.
	Update map[string]string

	// Log receives one line per step as it starts. Nil discards them.
	Log io.Writer
}

// clients are the service clients of one rehearsal.
type clients struct {
	s3     *s3.Client
	cfn    *cloudformation.Client
	ddb    *dynamodb.Client
	iam    *iam.Client
	lambda *lambda.Client
	events *eventbridge.Client
	cw     *cloudwatch.Client
	logs   *cloudwatchlogs.Client
}

func newClients(endpoint, region string) clients {
	cfg := aws.Config{
		Region:       region,
		BaseEndpoint: aws.String(endpoint),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "rehearsal", SecretAccessKey: "rehearsal", Source: "rehearsal"}, nil
		}),
	}
	return clients{
		s3:     s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true }),
		cfn:    cloudformation.NewFromConfig(cfg),
		ddb:    dynamodb.NewFromConfig(cfg),
		iam:    iam.NewFromConfig(cfg),
		lambda: lambda.NewFromConfig(cfg),
		events: eventbridge.NewFromConfig(cfg),
		cw:     cloudwatch.NewFromConfig(cfg),
		logs:   cloudwatchlogs.NewFromConfig(cfg),
	}
}

// rehearsal is the state of one Run.
type rehearsal struct {
	opts      Options
	c         clients
	report    *Report
	tplPath   string
	cfg       SAMConfig
	fns       []infra.Function
	artifacts map[string]Artifact
	doc       map[string]any // the transformed template
	stackID   string
	params    map[string]string // the parameters of the current stack
	physical  map[string]string // logical id -> physical id, from the stack
	types     map[string]string // logical id -> resource type, from the stack
}

// Run rehearses a deployment of the module's template against the
// moto_server at opts.Endpoint, as the package documentation describes.
// It returns the report, and an error wrapping [ErrCheckFailed] when a
// check failed, or another error when a step could not be carried out.
func Run(ctx context.Context, opts Options) (*Report, error) {
	if opts.Endpoint == "" {
		return nil, errors.New("rehearsal: Options.Endpoint is required")
	}
	if opts.Region == "" {
		opts.Region = DefaultRegion
	}
	if opts.Update == nil {
		opts.Update = map[string]string{"LogLevel": "DEBUG", "LogRetentionDays": "30"}
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if opts.Root == "" {
		root, err := infra.ModuleRoot()
		if err != nil {
			return nil, fmt.Errorf("rehearsal: %w", err)
		}
		opts.Root = root
	}
	if opts.WorkDir == "" {
		dir, err := os.MkdirTemp("", "dedupe-rehearsal-")
		if err != nil {
			return nil, fmt.Errorf("rehearsal: %w", err)
		}
		defer os.RemoveAll(dir)
		opts.WorkDir = dir
	}
	r := &rehearsal{
		opts:    opts,
		c:       newClients(opts.Endpoint, opts.Region),
		report:  &Report{Durations: map[string]time.Duration{}},
		tplPath: filepath.Join(opts.Root, infra.TemplateFile),
	}
	steps := []struct {
		name string
		fn   func(context.Context) error
	}{
		{"build", r.build},
		{"transform", r.transform},
		{"create", r.create},
		{"update", r.update},
		{"delete", r.delete},
	}
	for _, s := range steps {
		fmt.Fprintf(opts.Log, "rehearsal: %s\n", s.name)
		r.report.step = s.name
		start := time.Now()
		err := s.fn(ctx)
		r.report.Durations[s.name] = time.Since(start)
		if err != nil {
			return r.report, fmt.Errorf("rehearsal %s: %w", s.name, err)
		}
	}
	if failed := r.report.Failed(); len(failed) > 0 {
		return r.report, fmt.Errorf("%w: %d of %d checks", ErrCheckFailed, len(failed), len(r.report.Checks))
	}
	return r.report, nil
}

// build reads samconfig.toml, builds and zips every function as sam build
// would, and checks the artifacts.
func (r *rehearsal) build(ctx context.Context) error {
	cfg, err := LoadSAMConfig(filepath.Join(r.opts.Root, "samconfig.toml"))
	if err != nil {
		return err
	}
	r.cfg = cfg
	r.report.StackName = cfg.StackName
	r.report.that("samconfig build_in_source", cfg.BuildInSource, fmt.Sprint(cfg.BuildInSource), "true: no scratch copy of CodeUri")
	r.report.eq("samconfig capabilities", cfg.Capabilities, []string{"CAPABILITY_IAM"})

	tpl, err := infra.Load(r.tplPath)
	if err != nil {
		return err
	}
	if r.fns, err = infra.Functions(tpl); err != nil {
		return err
	}
	r.artifacts = map[string]Artifact{}
	codeURIs := map[string]bool{}
	for _, fn := range r.fns {
		a, err := build(ctx, r.opts.Root, r.opts.WorkDir, fn)
		if err != nil {
			return err
		}
		r.artifacts[fn.LogicalID] = a
		codeURIs[fn.CodeURI] = true
		arch := "x86_64"
		if slices.Contains(fn.Architectures, "arm64") {
			arch = "arm64"
		}
		desc, err := inspectZip(a.Zip, arch)
		r.report.that(fn.LogicalID+" artifact", err == nil, desc+errText(err), "one executable static "+arch+" bootstrap")
	}
	var total sourceTree
	for uri := range codeURIs {
		t, err := walkSource(filepath.Join(r.opts.Root, uri))
		if err != nil {
			return err
		}
		total.files, total.bytes, total.nodeModules = total.files+t.files, total.bytes+t.bytes, total.nodeModules+t.nodeModules
	}
	r.report.Copied = fmt.Sprintf("%d files, %.1f MiB, %d of them under node_modules, per function", total.files, float64(total.bytes)/(1<<20), total.nodeModules)
	return nil
}

// transform uploads the artifacts as sam package would and applies the SAM
// transform with their locations.
func (r *rehearsal) transform(ctx context.Context) error {
	bucket := "aws-sam-cli-managed-rehearsal-" + r.opts.Region
	if _, err := r.c.s3.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		return fmt.Errorf("create bucket %s: %w", bucket, err)
	}
	code := map[string]string{}
	for id, a := range r.artifacts {
		key := strings.TrimPrefix(r.cfg.S3Prefix+"/"+a.MD5, "/")
		if _, err := r.c.s3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(a.Zip)}); err != nil {
			return fmt.Errorf("upload %s: %w", id, err)
		}
		code[id] = "s3://" + bucket + "/" + key
	}
	out, err := infra.Transform(ctx, r.tplPath, infra.TransformOptions{Region: r.opts.Region, Code: code, Parameters: r.cfg.Parameters})
	if err != nil {
		return err
	}
	if err := json.Unmarshal(out, &r.doc); err != nil {
		return fmt.Errorf("decode the transformed template: %w", err)
	}
	if err := os.WriteFile(filepath.Join(r.opts.WorkDir, "template.packaged.json"), out, 0o644); err != nil {
		return fmt.Errorf("write the packaged template: %w", err)
	}
	_, hasTransform := r.doc["Transform"]
	r.report.that("no Transform left", !hasTransform, fmt.Sprintf("Transform present: %v", hasTransform), "plain CloudFormation")
	r.checkAuth()
	return nil
}

// create creates the stack and checks everything it made.
func (r *rehearsal) create(ctx context.Context) error {
	body, err := json.Marshal(r.doc)
	if err != nil {
		return err
	}
	caps := make([]cfntypes.Capability, 0, len(r.cfg.Capabilities))
	for _, c := range r.cfg.Capabilities {
		caps = append(caps, cfntypes.Capability(c))
	}
	out, err := r.c.cfn.CreateStack(ctx, &cloudformation.CreateStackInput{
		StackName:    aws.String(r.cfg.StackName),
		TemplateBody: aws.String(string(body)),
		Capabilities: caps,
		Parameters:   parameters(r.cfg.Parameters),
	})
	if err != nil {
		return fmt.Errorf("create stack %s: %w", r.cfg.StackName, err)
	}
	r.stackID = aws.ToString(out.StackId)
	r.params = maps(r.cfg.Parameters)
	if err := r.wait(ctx, cfntypes.StackStatusCreateComplete); err != nil {
		return err
	}
	if err := r.loadResources(ctx); err != nil {
		return err
	}
	r.checkResources()
	for _, check := range []func(context.Context) error{r.checkTables, r.checkRoles, r.checkFunctions, r.checkSchedules, r.checkAlarm, r.checkLogGroups, r.checkOutputs} {
		if err := check(ctx); err != nil {
			return err
		}
	}
	return nil
}

// update changes parameters and checks that the change reached the
// functions and log groups, and that no table was replaced.
func (r *rehearsal) update(ctx context.Context) error {
	tablesBefore := map[string]string{}
	for id, typ := range r.types {
		if typ == "AWS::DynamoDB::Table" {
			tablesBefore[id] = r.physical[id]
		}
	}
	next := maps(r.params)
	for k, v := range r.opts.Update {
		next[k] = v
	}
	caps := make([]cfntypes.Capability, 0, len(r.cfg.Capabilities))
	for _, c := range r.cfg.Capabilities {
		caps = append(caps, cfntypes.Capability(c))
	}
	if _, err := r.c.cfn.UpdateStack(ctx, &cloudformation.UpdateStackInput{
		StackName:           aws.String(r.stackID),
		UsePreviousTemplate: aws.Bool(true),
		Capabilities:        caps,
		Parameters:          parameters(next),
	}); err != nil {
		return fmt.Errorf("update stack: %w", err)
	}
	r.params = next
	if err := r.wait(ctx, cfntypes.StackStatusUpdateComplete); err != nil {
		return err
	}
	if err := r.loadResources(ctx); err != nil {
		return err
	}
	for id, name := range tablesBefore {
		r.report.eq(id+" kept (not replaced)", r.physical[id], name)
	}
	for _, check := range []func(context.Context) error{r.checkFunctions, r.checkLogGroups} {
		if err := check(ctx); err != nil {
			return err
		}
	}
	return nil
}

// delete deletes the stack and checks that its tables, functions and roles
// are gone.
func (r *rehearsal) delete(ctx context.Context) error {
	if _, err := r.c.cfn.DeleteStack(ctx, &cloudformation.DeleteStackInput{StackName: aws.String(r.stackID)}); err != nil {
		return fmt.Errorf("delete stack: %w", err)
	}
	if err := r.wait(ctx, cfntypes.StackStatusDeleteComplete); err != nil {
		return err
	}
	ids := slices.Sorted(keys(r.physical))
	for _, id := range ids {
		name := r.physical[id]
		var err error
		switch r.types[id] {
		case "AWS::DynamoDB::Table":
			_, err = r.c.ddb.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
		case "AWS::Lambda::Function":
			_, err = r.c.lambda.GetFunction(ctx, &lambda.GetFunctionInput{FunctionName: aws.String(name)})
		case "AWS::IAM::Role":
			_, err = r.c.iam.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(name)})
		default:
			continue
		}
		if nested(r.doc, "Resources", id, "DeletionPolicy") == "Retain" {
			// Kept on purpose (the payments): it outlives the stack, and
			// the rehearsal deletes it itself afterwards.
			got := "still there"
			if err != nil {
				got = "lookup error: " + errText(err)
			}
			r.report.that(id+" retained", err == nil, got, "still there")
			if err == nil && r.types[id] == "AWS::DynamoDB::Table" {
				if _, err := r.c.ddb.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)}); err != nil {
					return fmt.Errorf("delete retained table %s: %w", name, err)
				}
			}
			continue
		}
		got := "gone"
		if !isNotFound(err) {
			got = "still there (lookup error: " + errText(err) + ")"
		}
		r.report.that(id+" deleted", isNotFound(err), got, "gone")
	}
	return nil
}

// wait polls the stack until it reaches want, fails on any other final
// status, and checks it.
func (r *rehearsal) wait(ctx context.Context, want cfntypes.StackStatus) error {
	ctx, cancel := context.WithTimeout(ctx, stackTimeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		out, err := r.c.cfn.DescribeStacks(ctx, &cloudformation.DescribeStacksInput{StackName: aws.String(r.stackID)})
		if err != nil {
			return fmt.Errorf("describe stack: %w", err)
		}
		st := out.Stacks[0]
		status := st.StackStatus
		if status == want {
			r.report.eq("stack status", status, want)
			return nil
		}
		if s := string(status); !strings.HasSuffix(s, "_IN_PROGRESS") {
			r.report.eq("stack status", status, want)
			return fmt.Errorf("stack %s: %s (%s)%s", r.cfg.StackName, status, aws.ToString(st.StackStatusReason), r.events(ctx))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("stack %s: still %s: %w", r.cfg.StackName, status, ctx.Err())
		case <-tick.C:
		}
	}
}

// events returns the stack's failed events, for an error message.
func (r *rehearsal) events(ctx context.Context) string {
	out, err := r.c.cfn.DescribeStackEvents(ctx, &cloudformation.DescribeStackEventsInput{StackName: aws.String(r.stackID)})
	if err != nil {
		return ""
	}
	var b strings.Builder
	for _, e := range out.StackEvents {
		if strings.HasSuffix(string(e.ResourceStatus), "_FAILED") {
			fmt.Fprintf(&b, "\n  %s %s: %s", aws.ToString(e.LogicalResourceId), e.ResourceStatus, aws.ToString(e.ResourceStatusReason))
		}
	}
	return b.String()
}

// loadResources reads the stack's resources.
func (r *rehearsal) loadResources(ctx context.Context) error {
	r.physical, r.types = map[string]string{}, map[string]string{}
	p := cloudformation.NewListStackResourcesPaginator(r.c.cfn, &cloudformation.ListStackResourcesInput{StackName: aws.String(r.stackID)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("list stack resources: %w", err)
		}
		for _, s := range page.StackResourceSummaries {
			id := aws.ToString(s.LogicalResourceId)
			if id == "" {
				// moto lists a resource it does not model as an empty
				// summary; checkResources names what is missing.
				continue
			}
			r.physical[id] = aws.ToString(s.PhysicalResourceId)
			r.types[id] = aws.ToString(s.ResourceType)
			if s.ResourceStatus != cfntypes.ResourceStatusCreateComplete && s.ResourceStatus != cfntypes.ResourceStatusUpdateComplete {
				r.report.eq(id+" status", s.ResourceStatus, cfntypes.ResourceStatusCreateComplete)
			}
		}
	}
	return nil
}

// notModelled reports whether typ is a resource type of the template that
// moto's CloudFormation accepts but does not create.
func notModelled(typ string) bool {
	switch typ {
	case "AWS::ApiGatewayV2::Api", "AWS::ApiGatewayV2::Stage", "AWS::CloudWatch::Alarm":
		return true
	}
	return false
}

// checkResources checks that the stack created every resource of the
// transformed template, with its type.
func (r *rehearsal) checkResources() {
	res := r.doc["Resources"].(map[string]any)
	for _, id := range slices.Sorted(keys(res)) {
		typ, _ := res[id].(map[string]any)["Type"].(string)
		got, ok := r.types[id]
		if !ok && notModelled(typ) {
			r.report.Gaps = append(r.report.Gaps, Gap{Step: r.report.step, What: id, Want: typ + " created", Got: "not created",
				Why: "moto's CloudFormation does not model " + typ + "; it lists an empty resource instead"})
			continue
		}
		r.report.eq(id+" type", got, typ)
	}
}

// parameters turns a map into CloudFormation parameters, sorted.
func parameters(m map[string]string) []cfntypes.Parameter {
	out := make([]cfntypes.Parameter, 0, len(m))
	for _, k := range slices.Sorted(keys(m)) {
		out = append(out, cfntypes.Parameter{ParameterKey: aws.String(k), ParameterValue: aws.String(m[k])})
	}
	return out
}

// maps returns a copy of m.
func maps(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// keys returns m's keys, unsorted.
func keys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// sortedCopy returns s sorted.
func sortedCopy(s []string) []string {
	out := slices.Clone(s)
	sort.Strings(out)
	return out
}

// errText is err's message, or "" for nil.
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// isNotFound reports whether err says the resource does not exist.
func isNotFound(err error) bool {
	if err == nil {
		return false
	}
	s := err.Error()
	return strings.Contains(s, "NotFound") || strings.Contains(s, "NoSuchEntity") || strings.Contains(s, "not found") || strings.Contains(s, "does not exist")
}
