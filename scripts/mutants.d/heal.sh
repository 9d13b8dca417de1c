# shellcheck shell=bash
# Sourced by scripts/mutants: the replay of missed webhook deliveries. The cursor over the App's
# delivery log never passes a delivery that was not handled: not one whose handling failed, not one
# left for the next run by the budget, not one that has not settled; and it never moves back.

H=internal/heal/heal.go
mutant "the delivery cursor passes a delivery that failed" $H \
  's/("err", err\)\n\t\t\t\treturn rep, h\.advance\(ctx, rep, )handled\)/${1}mark(d))/' \
  TestCursorStopsBeforeAFailure ./internal/heal/
mutant "the delivery cursor passes what the budget left for the next run" $H \
  's/("max_replays", h\.o\.MaxReplays\)\n)\t\t\treturn rep, h\.advance\(ctx, rep, handled\)/${1}\t\t\tcontinue/' \
  TestRestartContinuesFromTheCursor ./internal/heal/
mutant "the delivery cursor passes an attempt that has not settled" $H \
  's/\t\tcase d\.DeliveredAt\.After\(settled\):/\t\tcase false \&\& d.DeliveredAt.After(settled):/' \
  TestNotReplayedIsReported ./internal/heal/
mutant "the delivery cursor moves back" internal/authority/deliveries.go \
  's/if d\.Deliveries != nil && !d\.Deliveries\.Handled\.Before\(m\) \{/if false {/' \
  TestConformance/Deliveries/NeverBack
mutant "a replayed delivery counts as a live one" internal/metrics/metrics.go \
  's/\tm\.replayed\.WithLabelValues\(event, outcome\(status\)\)\.Inc\(\)/\tm.deliveries.WithLabelValues(event, outcome(status)).Inc()/' \
  TestReplayedDeliveriesAreCounted ./internal/heal/
mutant "a replay that failed is not counted" internal/heal/heal.go \
  's/\t\tstatus := statusOf\(err\)\n\t\th\.counted\(d\.Event, status\)\n/\t\tstatus := statusOf(err)\n/' \
  TestReplayedDeliveriesAreCounted ./internal/heal/
