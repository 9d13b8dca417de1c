package authority

// The latest-wins rule for a commit that is not pending, as a job that knows only its commit asks
// it (the deployment protection rule): a commit the environment accepted is superseded in a scope
// by a commit accepted there at a newer generation; one it never accepted, only by a commit the
// store knows to be newer than it. A pending commit is not judged here: the deploy gate's
// evaluator (Hold) says whether its pass may go.

// AcceptedGeneration is the newest generation at which e accepted sha for any scope (pending,
// live, or in the timeline), 0 when it never did.
func (e *Env) AcceptedGeneration(sha string) int64 {
	var g int64
	for _, sc := range e.Scopes {
		for _, r := range sc.Entries() {
			if r.Sha == sha {
				g = max(g, r.Generation)
			}
		}
		if sc.Live != nil && sc.Live.Sha == sha {
			g = max(g, sc.Live.Generation)
		}
	}
	for _, ev := range e.Events {
		if ev.Kind == EventAccepted && ev.Sha == sha {
			g = max(g, ev.Generation)
		}
	}
	return g
}

// SupersededIn is the commit that supersedes sha in scope of e, nil when none does: the scope's
// newest accepted commit (its last pending intent, else what is live), when it is another commit
// and either was accepted at a generation newer than any e accepted sha at, or, for a commit e
// never accepted, the store knows sha as older than it (it was pushed on top of sha, or sha's
// arrival is among the events, recorded as superseded).
func (e *Env) SupersededIn(scope, sha string) *Ref {
	n := newestAccepted(e.Scopes[scope])
	if n == nil || n.Sha == sha {
		return nil
	}
	if at := e.AcceptedGeneration(sha); at > 0 {
		if n.Generation > at {
			return n
		}
		return nil
	}
	if e.knowsOlder(n, sha) {
		return n
	}
	return nil
}

// newestAccepted is the scope's newest accepted commit: the last pending, else live.
func newestAccepted(sc *Scope) *Ref {
	switch {
	case sc == nil:
		return nil
	case sc.Mailbox != nil:
		entries := sc.Entries()
		return entries[len(entries)-1]
	case sc.Live != nil:
		return &Ref{Generation: sc.Live.Generation, Sha: sc.Live.Sha, Ref: sc.Live.Ref}
	}
	return nil
}

// knowsOlder reports whether the store knows sha as older than n: n was pushed on top of it, or
// it arrived out of order and was recorded (among the newest events).
func (e *Env) knowsOlder(n *Ref, sha string) bool {
	if n.Before == sha {
		return true
	}
	for _, ev := range e.Events {
		if ev.Sha == sha {
			return true
		}
	}
	return false
}
