package wire_test

import (
	"bytes"
	"fmt"

	"github.com/easyscale/easyscale-slurm/runtime/wire"
)

// A frame written with WriteFrame is read back with ReadFrame, which checks
// magic, version and the size cap before it allocates.
func Example() {
	var buf bytes.Buffer
	if err := wire.WriteFrame(&buf, wire.TypeRingHello, []byte(`{"rank":2}`)); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("% x\n", buf.Bytes()[:wire.HeaderSize])
	h, payload, err := wire.ReadFrame(&buf, wire.MaxControl)
	fmt.Println(h.Type, h.Len, string(payload), err)

	_, _, err = wire.ReadFrame(bytes.NewReader([]byte("GET / HTTP/1.1\r\n")), wire.MaxControl)
	fmt.Println(err)
	// Output:
	// 45 53 57 01 10 0a 00 00 00
	// ring-hello 10 {"rank":2} <nil>
	// wire: frame starts with "GET", want "ESW": the peer does not speak the EasyScale protocol
}
