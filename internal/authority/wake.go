package authority

// Changed returns a channel that is closed at this process's next successful write of env's
// document: a waiter that took it before asking and was refused asks again when it closes, so a
// lease released through the same Authority is handed over without polling (the App's API long
// poll). Writes by other processes close nothing; a waiter still asks again at the lease's expiry.
func (a *Authority) Changed(env string) <-chan struct{} {
	key := EnvKey(env)
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

// woke closes the channel of key's waiters, if any: its document was just written.
func (a *Authority) woke(key string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if ch, ok := a.wake[key]; ok {
		close(ch)
		delete(a.wake, key)
	}
}
