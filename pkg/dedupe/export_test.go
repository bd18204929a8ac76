package dedupe

// Names the external tests (package dedupe_test) use of what is
// unexported: the test binary alone sees them.
var (
	RequestIDFrom = requestIDFrom
	TraceFrom     = traceFrom
	SourceKey     = sourceKey
)

// The expressions of Handler, compiled as Handler compiles them.
var (
	CompileExpr     = compileExpr
	MustCompileExpr = mustCompileExpr
)
