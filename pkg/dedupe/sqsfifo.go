package dedupe

import (
	"strings"

	"github.com/aws/aws-lambda-go/events"
)

// SQSDeduplicationID is an SQSConfig.Key for FIFO queues: it keys a
// message by its message group and its MessageDeduplicationId, and
// returns "" (the message fails, loudly) for a message without them, such
// as one from a standard queue.
//
//	dedupe.SQS(g, &dedupe.SQSConfig{Key: dedupe.SQSDeduplicationID}, process)
//
// What it deduplicates. SQS itself drops a send whose deduplication ID it
// has seen on the queue in the last 5 minutes, so a producer's quick
// retries never reach the function. It does nothing after 5 minutes, and
// nothing for a message SQS delivers again (a visibility timeout that ran
// out, a failed batch). This key catches both for Config.Retention: a
// redelivery keeps its deduplication ID, and so does a producer's re-send
// after the 5 minutes (it gets a new message ID, so keying by message ID
// would run it again).
//
// What it does not. With content-based deduplication the ID is the
// SHA-256 of the body: two requests meant as distinct but with the same
// body are one key (put what makes them distinct, an order ID, in the
// body), and a re-send whose body changed (a fresh timestamp) is a new
// key. The group is part of the key because a queue with
// DeduplicationScope messageGroup (high throughput) treats the same ID in
// two groups as two messages. An ID chosen by the producer is only as
// good as the producer's choice.
func SQSDeduplicationID(m events.SQSMessage) string {
	group, id := m.Attributes["MessageGroupId"], m.Attributes["MessageDeduplicationId"]
	if group == "" || id == "" {
		return ""
	}
	var b strings.Builder
	b.WriteString("fifo|")
	writeEscaped(&b, group)
	b.WriteByte('|')
	writeEscaped(&b, id)
	return b.String()
}
