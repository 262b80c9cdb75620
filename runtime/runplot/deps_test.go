package runplot

import (
	"os/exec"
	"strings"
	"testing"
)

// TestTheComputeNodeBinaryDoesNotLinkThePicture: drawing is for the user's
// machine; bin/easyscale, which runs on compute nodes, must not carry it.
func TestTheComputeNodeBinaryDoesNotLinkThePicture(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "../cmd/easyscale").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps ./runtime/cmd/easyscale: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasSuffix(pkg, "/runtime/runplot") {
			t.Errorf("bin/easyscale links %s", pkg)
		}
	}
}
