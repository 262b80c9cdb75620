package config_test

import (
	"fmt"

	"github.com/easyscale/easyscale-slurm/backfill/config"
)

func ExampleParse() {
	c, err := config.Parse(`
poll_interval = "5s"
partitions = ["normal"]
[extra]
partition = "low"
`)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(c.PollInterval, c.Partitions, c.Extra.Partition, c.SafetyMargin, c.Speeds["t4"])

	_, err = config.Parse("poll_interval = \"0s\"\npartiton = \"low\"\n")
	fmt.Println(err)
	_, err = config.Parse("[limits]\nwaste_cap = 1.5\n")
	fmt.Println(err)
	_, err = config.Parse("waste_cap = 0.2\n")
	fmt.Println(err)
	// Output:
	// 5s [normal] low 1m0s 0.52
	// unknown keys partiton (did you mean partitions?): remove or rename them (the keys are listed in contrib/backfill.toml, installed as PREFIX/share/easyscale/backfill.toml)
	// limits.waste_cap = "1.5": must be in (0, 1); EasyScale uses 0.30
	// unknown keys waste_cap (it belongs under [limits]: limits.waste_cap): remove or rename them (the keys are listed in contrib/backfill.toml, installed as PREFIX/share/easyscale/backfill.toml)
}
