package torchengine

import (
	"errors"
	"testing"
)

// The same failure of several members is printed once, naming them; each
// member's error stays reachable with errors.As (local.go reads Rank and
// Committed).
func TestMemberErrorsPrintASharedMessageOnce(t *testing.T) {
	past := errors.New("job error: the training loop asks for step 21, past the job's 20 steps")
	m := &memberErrors{[]*MemberError{{Rank: 0, Err: past}, {Rank: 1, Err: past}, {Rank: 3, Committed: true, Err: errors.New("lost")}}}
	want := "members 0, 1: job error: the training loop asks for step 21, past the job's 20 steps\nmember 3: lost"
	if got := m.err().Error(); got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	var me *MemberError
	if !errors.As(m.err(), &me) || me.Rank != 0 {
		t.Errorf("errors.As found %+v, want member 0", me)
	}
	if !errors.Is(m.err(), past) {
		t.Errorf("errors.Is does not reach a member's cause")
	}
	if (&memberErrors{}).err() != nil {
		t.Errorf("no member failed, yet err() is not nil")
	}
	if one := (&memberErrors{[]*MemberError{{Rank: 2, Err: past}}}).err(); one.Error() != "member 2: "+past.Error() {
		t.Errorf("one member's error = %q", one)
	}
}
