package authority

import "time"

// Windows are an environment's change windows: when a commit may deploy there.
type Windows struct {
	Timezone string `json:"timezone,omitempty"`
}

func (w *Windows) validate() error { return nil }

func (w *Windows) normal() *Windows { return nil }

func (w *Windows) String() string { return "" }

// WindowWait is what a commit waits for outside the change window (ReasonWindow).
type WindowWait struct {
	Opens time.Time `json:"opens"`
}

func (w *WindowWait) text() string { return "outside the change window" }

// windowWait says whether the pass of ref waits for a change window; nil: it may go now.
func windowWait(v View, ref *Ref, now time.Time) *WindowWait { return nil }

// retryAfter is how soon a pass outside the change window is told to ask again.
func (w *WindowWait) retryAfter(now time.Time) time.Duration { return promotionRetry }
