package authority

import "strings"

// Changed returns a channel that is closed at this process's next successful write of env's
// document: a waiter that took it before asking and was refused asks again when it closes, so a
// lease released through the same Authority is handed over without polling (the App's API long
// poll). Writes by other processes close nothing; a waiter still asks again at the lease's expiry.
func (a *Authority) Changed(env string) <-chan struct{} { return a.changed(EnvKey(env)) }

// ChangedScope is Changed for a waiter on one scope: its channel closes at this process's next
// write of that scope's state or of what every scope's gate reads (the single document, the head
// of the per-scope layout), but not at a write of another scope's document, so that the waiters
// of a wide environment are not all woken by every write of it.
func (a *Authority) ChangedScope(env, scope string) <-chan struct{} {
	return a.changed(ScopeKey(env, scope))
}

func (a *Authority) changed(key string) <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.wake == nil {
		a.wake = map[string]chan struct{}{}
	}
	ch, ok := a.wake[key]
	if !ok {
		ch = make(chan struct{})
		a.wake[key] = ch
	}
	return ch
}

// woke closes the channels of key's waiters: its document was just written. For an
// environment's document (or head) that is every scope's waiters too.
func (a *Authority) woke(key string) {
	if env, ok := strings.CutPrefix(key, envKeyPrefix); ok {
		a.wokeScopes(env, nil)
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if ch, ok := a.wake[key]; ok {
		close(ch)
		delete(a.wake, key)
	}
}

// wokeScopes closes the channels of the waiters on env and on the scopes written (nil: every
// scope of it).
func (a *Authority) wokeScopes(env string, scopes []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	wake := func(key string) {
		if ch, ok := a.wake[key]; ok {
			close(ch)
			delete(a.wake, key)
		}
	}
	wake(EnvKey(env))
	if scopes != nil {
		for _, s := range scopes {
			wake(ScopeKey(env, s))
		}
		return
	}
	prefix := ScopeKey(env, "")
	for key := range a.wake {
		if strings.HasPrefix(key, prefix) {
			wake(key)
		}
	}
}
