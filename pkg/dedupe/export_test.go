package dedupe

// Names the external tests (package dedupe_test) use of what is
// unexported: the test binary alone sees them.
var (
	RequestIDFrom = requestIDFrom
	TraceFrom     = traceFrom
	SourceKey     = sourceKey
)
