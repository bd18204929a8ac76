package tiny

import "testing"

func TestMax(t *testing.T) {
	if got := Max(2, 1); got != 2 {
		t.Errorf("Max(2, 1) = %d, want 2", got)
	}
}
