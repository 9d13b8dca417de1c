# shellcheck shell=bash
# Mutants of the rules the coordination property test checks (internal/store/storetest/
# coordination*.go): each breaks one rule in internal/authority, and the property test must fail
# on the memory store. Sourced by scripts/mutants, which defines `mutant`.

prop=TestConformance/Property/Coordination
pt=internal/authority/transitions.go
pp=internal/authority/policy.go
pm=internal/authority/promote.go
pr=internal/authority/rollback.go
pd=internal/authority/decide.go

# Fencing: a stale token never renews, completes or frees a newer grant's lease.
mutant "a completion that lost its lease frees the grant of its holder and generation whatever its token" $pt \
  's/if tok, ok := tokens\[name\]; ok && sc\.Lease\.Holder == holder && sc\.Lease\.Token == tok && /if _, ok := tokens[name]; ok \&\& sc.Lease.Holder == holder \&\& /' \
  $prop
mutant "an interrupted completion is not fenced by its token" $pt \
  's/c\.Tokens\); err != nil && c\.Outcome != OutcomeLost \{/c.Tokens); err != nil \&\& c.Outcome != OutcomeLost \&\& c.Outcome != OutcomeInterrupted {/' \
  $prop
mutant "a token check takes an older token of the lease too" $pt \
  's/if sc\.Lease\.Holder != holder \|\| sc\.Lease\.Token != tok \|\|/if sc.Lease.Holder != holder || sc.Lease.Token < tok ||/' \
  $prop
mutant "a freed lease forgets its token" $pt \
  's/\tl\.Holder, l\.ExpiresAt, l\.Sha, l\.Ref = "", time\.Time\{\}, "", ""\n/\t*l = Lease{}\n/' \
  $prop
mutant "a lease is taken over at its expiry, without the skew margin" $pt \
  's/\|\| !now\.Before\(l\.ExpiresAt\.Add\(skew\)\)\n/|| !now.Before(l.ExpiresAt)\n/' \
  $prop

# Authority: a superseded pass never deploys; live and owners never go back.
mutant "a pass older than the scope's owner keeps its authority" $pd \
  's/\tif sc\.Owner != gen \{\n\t\tsha := ""/\tif sc.Owner < gen {\n\t\tsha := ""/' \
  $prop
mutant "a head claimed while it waited is owned by its pass even when a newer pass owns the scope" $pp \
  's/if head\.Claimed && s\.Owner < head\.Generation \{/if head.Claimed {/' \
  $prop
mutant "newer intents waiting behind a head supersede the pass that took it over" $pd \
  's/list\[len\(list\)-1\]\.Generation > gen && \(sc\.Owner != gen \|\| list\[0\]\.Generation > gen\):/list[len(list)-1].Generation > gen:/' \
  $prop
mutant "a success records the head its pass would end, not what its grant deployed" $pt \
  's/if \(sup != nil \|\| sc\.grantedOther\(c\.Generation\)\) && e\.deployedUnderGrant/if sup != nil \&\& e.deployedUnderGrant/' \
  $prop
# Found by the property test's long setting; its focused test holds it by default.
mutant "a deploy under a grant is recorded only when it is newer than live" $pt \
  's/\tif sc\.Live != nil && sc\.Live\.Generation > c\.Generation \{/\tif sc.Live != nil \&\& sc.Live.Generation >= c.Generation {/' \
  TestConformance/Policy/SecondTakenOverHeadSupersededWhileDeploying
mutant "a pass that took over a head may deploy it after it failed terminally" $pd \
  's/pos <= 0 && len\(list\) > 0 && list\[0\]\.Failed:/pos == 0 \&\& list[0].Failed:/' \
  $prop

mutant "a success records the newest pending commit, not the one its grant deployed" $pt \
  's/\t\tpos := max\(sc\.position\(c\.Generation\), 0\) \/\/ the pass/\t\tpos := len(sc.Entries()) - 1 \/\/ the pass/' \
  $prop
mutant "a claim by a pass older than the owner is answered as claimed" $pt \
  's/\t\tcase sc\.Owner > gen:\n/\t\tcase false:\n/' \
  $prop

# Generations and observed.
mutant "a rollback takes the newest generation instead of a new one" $pr \
  's/\tgen, err := e\.nextGeneration\(\[\]string\{r\.Scope\}\)\n/\tgen, err := e.Desired, error(nil)\n/' \
  $prop
mutant "observed follows the pending intents down after a retry" $pt \
  's/\tif obs > e\.Observed \{/\tif obs != e.Observed {/' \
  $prop
mutant "a failed intent holds observed back" $pt \
  's/if !m\.Failed \{ \/\/ a failed intent has its outcome/if true { \/\/ a failed intent has its outcome/' \
  $prop

# Queues, barriers and the queue limit.
mutant "under latest the queue bound skips the newest entry" $pp \
  's/\t\tn := 0\n\t\tfor i, r := range list \{/\t\tn := 0\n\t\tfor i, r := range sc.Entries() {/' \
  $prop
mutant "under queue the bound counts only the intents behind the head" $pp \
  's/\} else if len\(list\) > limit \{/} else if len(sc.Queue) > limit {/' \
  $prop
mutant "a new intent goes ahead of those waiting" $pp \
  's/\tlist := append\(sc\.Entries\(\), entry\)/\tlist := append([]*Ref{entry}, sc.Entries()...)/' \
  $prop
mutant "under latest an older intent stays pending behind a newer one" $pp \
  's/case r\.Barrier \|\| \(last && !r\.Failed\):/case r.Barrier || (last || !r.Failed):/' \
  $prop
mutant "under queue a pass need not wait for the intents ahead of it" $pd \
  's/\tcase pos > 0:\n\t\tout\.Reason = ReasonQueued\n/\tcase pos > 0 \&\& v.Policy != PolicyQueue:\n\t\tout.Reason = ReasonQueued\n/' \
  $prop

# Freezes and promotion.
mutant "a freeze holds only passes older than the rollback" $pr \
  's/return sc\.Freeze != nil && sc\.Freeze\.Generation != gen/return sc.Freeze != nil \&\& sc.Freeze.Generation > gen/' \
  $prop
mutant "a commit live in one required environment passes the gate" $pd \
  's/(v\.Descends\[descendKey\(ref\.Sha, live\.Sha\)\]\)\) \{\n\t\t\t)continue/${1}return nil/' \
  $prop

mutant "an unfreeze leaves the freeze in place" $pr \
  's/\t\tlifted = &f\n\t\tsc\.Freeze = nil\n/\t\tlifted = \&f\n/' \
  $prop

# Re-deliveries and outcomes.
mutant "a re-delivered rollback request takes a new generation" $pr \
  's/findPrior := a\.findRequest\(r\.Environment, id, &prior\)/findPrior := a.findRequest(r.Environment, "", \&prior)/' \
  $prop
mutant "a re-delivered promotion promotes what is live now" $pm \
  's/\tif r\.Request != "" \{\n\t\t\/\/ A repeat of the request promotes/\tif false {\n\t\t\/\/ A repeat of the request promotes/' \
  $prop
mutant "a rollback supersedes the head without recording it" $pr \
  's/\tfor _, m := range sc\.Entries\(\) \{\n\t\tif m\.Failed \{/\tfor _, m := range sc.Queue {\n\t\tif m.Failed {/' \
  $prop
mutant "a rollback records a failed intent as superseded too" $pr \
  's/\t\tif m\.Failed \{\n\t\t\tcontinue \/\/ it has its outcome already; it only stops blocking\n\t\t\}\n//' \
  $prop
mutant "a retryable failure forgets its attempt" $pt \
  's/\t\t\t\tm\.Attempt = max\(m\.Attempt, c\.Attempt\)\n/\t\t\t\t_ = c.Attempt\n/' \
  $prop
mutant "a retry decision keeps the failed attempts" $pp \
  's/sc\.Mailbox\.Failed, sc\.Mailbox\.Attempt = false, 0/sc.Mailbox.Failed = false/' \
  $prop

# The store's index of environments with pending work.
mutant "a settled environment stays in the pending index" internal/authority/authority.go \
  's/\t\t\twork\.Pending = work\.Env\.HasPending\(\)\n/\t\t\twork.Pending = true\n/' \
  $prop
