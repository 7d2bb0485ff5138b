package core

import "fmt"

// SetDevice writes a new value into a Device field of this live Nitro. It reuses every compiled
// program: Device values are program inputs, never part of a key. It refuses a GraphConst field
// (it bakes: build a new Nitro, which hits every cache entry the change does not move), a Host
// field (traced code never sees it) and a value of another dtype or shape (that would be another
// program, or fail inside XLA).
func (n *Nitro) SetDevice(name string, value any) (err error) {
	defer n.enter("SetDevice", &err, nil)()
	if n.spec.isScheduledDevice(name) {
		return fmt.Errorf("Device field %s is driven by a schedule, which rewrites it every optimizer step: a value written here would last until the next step and no longer; change the schedule instead (Schedules()[%q])", name, name)
	}
	return n.eng.SetDevice(name, value)
}
