// Package conntest holds checks of the fault-injecting connections that
// the stores' tests wrap around their drivers' sockets: [LosesWaitingRead]
// checks that a reply marked as lost is dropped even when the read that
// receives it was already waiting when the request was written, as pgx's
// background reader is after a slow write.
package conntest
