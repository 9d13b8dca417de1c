package authority

import "time"

// Soak is how long a commit must have been live in each environment this one requires before it
// deploys here.
type Soak struct {
	// For applies to every required environment.
	For time.Duration `json:"for,omitempty"`
}

func (s *Soak) validate(env string, req *Requirements) error { return nil }

func (s *Soak) normal() *Soak {
	if s == nil || s.For <= 0 {
		return nil
	}
	c := *s
	return &c
}

func (s *Soak) String() string {
	if s = s.normal(); s == nil {
		return ""
	}
	return "soak " + s.For.String()
}

// SoakWait is what a commit soaks for in a required environment (ReasonSoaking).
type SoakWait struct {
	Environment string `json:"environment"`
	Sha         string `json:"sha"`
}

func (w *SoakWait) text() string { return "soaking in " + w.Environment }

// soakWait says what the pass of ref soaks for; nil: nothing.
func soakWait(v View, ref *Ref, now time.Time) *SoakWait { return nil }

// retryAfter is how soon a pass soaking is told to ask again.
func (w *SoakWait) retryAfter(now time.Time) time.Duration { return promotionRetry }
