package authority

import "time"

// entry is what EnterDeploy asks of an accept: the holder of the deploy leases and their TTL.
type entry struct {
	holder string
	ttl    time.Duration
}

// EnterDeploy makes Accept, when it claims the intent's scopes, also enter the deploy phase for
// them in the same write when the gate lets the pass go now: the leases of holder for ttl, as
// Gate with that LeaseTTL grants them (AcceptResult.Entered). When the gate would not let it go
// (a lease another pass holds, a gate that holds, an intent that waits behind others), or cannot
// tell from the documents the accept writes (an environment that requires others, whose live
// commits Gate reads), or when the accept's write is not one document (in the per-scope layout:
// an intent of several scopes, which reaches them through the head's log, or one that switches
// the policy, which writes every scope; a part that lands before a lost race would hold leases
// the retry may not report), nothing of the gate is written and Entered stays nil: the pass asks
// Gate, which waits and records why. So the pass is what Accept and then Gate make of it, with
// nothing between them; latestwins run makes one conditional write fewer this way.
func EnterDeploy(holder string, ttl time.Duration) AcceptOption {
	return func(o *acceptOptions) { o.enter = &entry{holder: holder, ttl: ttl} }
}

func (en *entry) validate(claim bool) error {
	if !claim {
		return &InputError{Field: "enter", Fix: "enter the deploy phase only with an accept that claims its scopes"}
	}
	if en.ttl <= 0 {
		return &InputError{Field: "lease_ttl", Value: en.ttl.String(), Fix: "give the deploy leases a TTL above 0"}
	}
	return validateHolder(en.holder)
}

// enterAtOnce grants the deploy leases of the pass that just claimed c, when the accept's write
// is one document (oneDoc) and the gate lets the pass go on every claimed scope now: the gate
// decides on a copy of the environment, which replaces d's only when it grants, so that a refusal
// leaves the accept's write as it was and is recorded by the Gate that follows. It returns the
// grant, or nil.
func (d *Doc) enterAtOnce(en *entry, c *ClaimResult, oneDoc bool, now time.Time, skew time.Duration) *Grant {
	scopes := c.Scopes()
	if !oneDoc || len(scopes) == 0 || d.Env.Requires != nil {
		return nil
	}
	trial := d.Env.clone()
	g, err := trial.gate(c.Generation, scopes, "deploy", en.holder, en.ttl, now, skew, newRequired())
	if err != nil {
		return nil
	}
	d.Env = trial
	return g
}
