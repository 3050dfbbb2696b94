// Added by stowage's peers/karpenter/build-operator.sh (not part of Karpenter): the lifetime benchmark
// compresses a cluster's history by a factor k, and sets STOWAGE_TIME_SCALE=k so that the disruption
// controller's fixed wall-clock timers (the 10 s poll, the 15 s command validation, the orchestration
// queue's 1-10 s backoff) pass k times faster too, as consolidateAfter and the history do. Unset, empty
// or <= 1: every timer is Karpenter's own.

package disruption

import (
	"os"
	"strconv"
	"time"
)

// timeScaleFloor bounds a scaled timer from below (the same floor as stowage's side of the benchmark).
const timeScaleFloor = 100 * time.Millisecond

var timeScale = func() float64 {
	f, err := strconv.ParseFloat(os.Getenv("STOWAGE_TIME_SCALE"), 64)
	if err != nil || f <= 1 {
		return 1
	}
	return f
}()

// scaledTimer is d divided by STOWAGE_TIME_SCALE, but not below timeScaleFloor (nor above d).
func scaledTimer(d time.Duration) time.Duration {
	if timeScale == 1 {
		return d
	}
	return min(d, max(time.Duration(float64(d)/timeScale), timeScaleFloor))
}
