package dedupe

import "time"

// retention returns how long the record of call is kept once completed.
func (g *Guard) retention(call Call) time.Duration {
	if call.Retention > 0 {
		return call.Retention
	}
	return g.cfg.Retention
}
