package trace

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func TestReadGolden(t *testing.T) {
	tests := []struct {
		name, file string
	}{
		{"a Philly busy-week sample reads with the VC as user", "philly_sample.csv"},
		{"a Pollux workload sample gets runtimes from the application rule", "pollux_sample.csv"},
		{"an ITP sample reads its common columns", "itp_sample.csv"},
		{"an Alibaba openb sample skips pods that never ran", "openb_sample.csv"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			jobs, err := ReadFile(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.MarshalIndent(jobs, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", strings.TrimSuffix(tc.file, ".csv")+".golden.json")
			if *update {
				if err := os.WriteFile(golden, append(got, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("reading golden file (run with -update to create it): %v", err)
			}
			if !bytes.Equal(append(got, '\n'), want) {
				t.Errorf("jobs differ from %s:\n%s", golden, got)
			}
		})
	}
}

func TestReadErrors(t *testing.T) {
	const head = "job_id,submit_time_s,duration_s,num_gpus,gpu_type,status,is_training\n"
	const opt = "job_id,submit_time_s,duration_s,num_gpus,gpu_type,status,is_training,logical_workers,min_gpus,max_gpus,determinism,speeds\n"
	tests := []struct {
		name         string
		in           string
		line, column int
		field        string
	}{
		{"a negative submit time names its line and column", head + "a,0,5,1,,,1\nb,-3,5,1,,,1\n", 3, 2, "submit_time_s"},
		{"a fractional duration is rejected", head + "a,0,5.5,1,,,1\n", 2, 3, "duration_s"},
		{"a non-numeric GPU count is rejected", head + "a,0,5,x,,,1\n", 2, 4, "num_gpus"},
		{"an is_training flag other than 0 or 1 is rejected", head + "a,0,5,1,,,yes\n", 2, 7, "is_training"},
		{"a short row is a whole-row error", head + "a,0,5\n", 2, 0, ""},
		{"a long row is a whole-row error", head + "a,0,5,1,,,1,9\n", 2, 0, ""},
		{"a short Pollux row is a whole-row error", "name,time,application,num_replicas,batch_size\nx,1,ncf\n", 2, 0, ""},
		{"an unknown Pollux application is rejected", "name,time,application,num_replicas,batch_size\nx,1,gpt9,4,32\n", 2, 3, "application"},
		{"a Pollux job with no replicas is rejected", "name,time,application,num_replicas,batch_size\nx,1,ncf,0,32\n", 2, 4, "num_replicas"},
		{"a repeated job id names the row that repeats it", head + "a,0,5,1,,,1\nb,1,5,1,,,1\na,2,5,1,,,1\n", 4, 1, "job_id"},
		{"a repeated id is refused even on a row that never ran", head + "a,0,5,1,,,1\na,1,,1,,,1\n", 3, 1, "job_id"},
		{"a repeated Pollux job name is refused", "name,time,application,num_replicas,batch_size\nx,1,ncf,2,32\nx,5,ncf,2,32\n", 3, 1, "name"},
		{"a negative Pollux batch size names its column", "name,time,application,num_replicas,batch_size\nx,1,ncf,2,-1\n", 2, 5, "batch_size"},
		{"a zero Pollux batch size is refused", "name,time,application,num_replicas,batch_size\nx,1,ncf,2,0\n", 2, 5, "batch_size"},
		{"a fractional Pollux batch size is refused", "name,time,application,num_replicas,batch_size\nx,1,ncf,2,3.5\n", 2, 5, "batch_size"},
		{"fewer logical workers than GPUs are refused", opt + "a,0,5,4,,,1,2,,,,\n", 2, 8, "logical_workers"},
		{"a minimum above the request is refused", opt + "a,0,5,2,,,1,,3,,,\n", 2, 9, "min_gpus"},
		{"a maximum below the request is refused", opt + "a,0,5,2,,,1,,,1,,\n", 2, 10, "max_gpus"},
		{"a maximum above the logical workers is refused", opt + "a,0,5,2,,,1,4,,8,,\n", 2, 10, "max_gpus"},
		{"a zero logical worker count is refused with the fix", opt + "a,0,5,2,,,1,0,,,,\n", 2, 8, "logical_workers"},
		{"an unknown determinism level is refused", opt + "a,0,5,2,,,1,,,,d3,\n", 2, 11, "determinism"},
		{"a bad per-type speed is refused", opt + "a,0,5,2,,,1,,,,,t4:0\n", 2, 12, "speeds"},
		{"a speeds cell without TYPE:SPEED is refused", opt + "a,0,5,2,,,1,,,,,fast\n", 2, 12, "speeds"},
		{"a Pollux workload's optional column is checked too", "name,time,application,num_replicas,batch_size,max_gpus\nx,1,ncf,2,32,1\n", 2, 6, "max_gpus"},
		{"an unknown header is rejected on line 1", "a,b,c\n1,2,3\n", 1, 0, ""},
		{"an empty file is rejected", "", 1, 0, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Read(strings.NewReader(tc.in))
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("Read err = %v, want *ParseError", err)
			}
			if pe.Line != tc.line || pe.Field != tc.field || (tc.column != 0 && pe.Column != tc.column) {
				t.Errorf("ParseError at line %d column %d field %q, want %d, %d, %q (%v)", pe.Line, pe.Column, pe.Field, tc.line, tc.column, tc.field, err)
			}
			if strings.Contains(tc.name, "whole-row") && (!errors.Is(err, csv.ErrFieldCount) || !strings.Contains(err.Error(), "but the header has")) {
				t.Errorf("error %q does not wrap csv.ErrFieldCount giving both counts", err)
			}
			if strings.Contains(tc.name, "long row") && !strings.Contains(err.Error(), "quote a cell that holds a comma") {
				t.Errorf("error %q does not suggest quoting a cell with a comma", err)
			}
			if strings.Contains(tc.name, "repeated") && (!errors.Is(err, ErrDuplicateID) || !strings.Contains(err.Error(), "on line 2")) {
				t.Errorf("error %q does not wrap ErrDuplicateID naming the first line", err)
			}
		})
	}
}

func TestWriteReadRoundTrip(t *testing.T) {
	jobs := []Job{{ID: "a,b", Submit: 3, Duration: 9, GPUs: 2, GPUType: "v100", User: "vc\"1", Training: true},
		{ID: "z", Submit: 4, Duration: 1, GPUs: 0, Training: false},
		{ID: "e", Submit: 5, Duration: 7, GPUs: 4, Training: true, LogicalWorkers: 8, MinGPUs: 2, MaxGPUs: 6, Determinism: "d2"},
		{ID: "s", Submit: 6, Duration: 7, GPUs: 1, Training: true, Speeds: map[string]float64{"t4": 0.4, "v100": 1}}}
	var buf bytes.Buffer
	if err := Write(&buf, jobs); err != nil {
		t.Fatal(err)
	}
	got, err := Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, jobs) {
		t.Errorf("round trip = %+v, want %+v", got, jobs)
	}
	// the cluster column (Microsoft ITP's table) is written when a job has one
	jobs[1].Cluster, jobs[3].Cluster = "cluster01", "cluster04"
	buf.Reset()
	if err := Write(&buf, jobs); err != nil {
		t.Fatal(err)
	}
	if got, err = Read(&buf); err != nil || !reflect.DeepEqual(got, jobs) {
		t.Errorf("round trip with clusters = %+v (%v), want %+v", got, err, jobs)
	}
}

func FuzzRead(f *testing.F) {
	for _, name := range []string{"philly_sample.csv", "pollux_sample.csv", "openb_sample.csv"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("job_id,submit_time_s,duration_s,num_gpus,gpu_type,status,is_training\n\"a\nb\",1,2,3,,,1\n"))
	f.Add([]byte("job_id,submit_time_s,duration_s,num_gpus,gpu_type,status,is_training,speeds\na,1,2,3,,,1,\"t4:0.4,v100:1\"\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		jobs, err := Read(bytes.NewReader(data))
		if err != nil {
			return
		}
		for _, j := range jobs {
			if j.Duration < 1 || j.GPUs < 0 || j.Submit < 0 {
				t.Fatalf("Read accepted job %+v outside its documented ranges", j)
			}
		}
		var buf bytes.Buffer
		if err := Write(&buf, jobs); err != nil {
			t.Fatal(err)
		}
		again, err := Read(&buf)
		if err != nil {
			t.Fatalf("reading written jobs: %v", err)
		}
		if len(again) != len(jobs) || (len(jobs) > 0 && !reflect.DeepEqual(again, jobs)) {
			t.Fatalf("round trip changed jobs: %+v → %+v", jobs, again)
		}
	})
}

func TestElasticDefaults(t *testing.T) {
	tests := []struct {
		name string
		job  Job
		want Request
	}{
		{"a job that declares nothing runs ceil(R/2) to 2R GPUs with 2R logical workers, d1", Job{GPUs: 3},
			Request{MinGPUs: 2, MaxGPUs: 6, LogicalWorkers: 6}},
		{"a job that declares lw=R never grows past R", Job{GPUs: 4, LogicalWorkers: 4}, Request{MinGPUs: 2, MaxGPUs: 4, LogicalWorkers: 4}},
		{"a declared maximum is also the logical worker count", Job{GPUs: 2, MaxGPUs: 3}, Request{MinGPUs: 1, MaxGPUs: 3, LogicalWorkers: 3}},
		{"declared values are kept", Job{GPUs: 2, LogicalWorkers: 16, MinGPUs: 2, MaxGPUs: 8, Determinism: "d2"},
			Request{MinGPUs: 2, MaxGPUs: 8, LogicalWorkers: 16, D2: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.job.Elastic(); got != tc.want {
				t.Errorf("Elastic() = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestReadReportNamesMisspeltColumnsAndSkippedRows(t *testing.T) {
	const common = "job_id,submit_time_s,duration_s,num_gpus,gpu_type,status,is_training"
	for _, tc := range []struct {
		name, table string
		misspelt    map[string]string
		skipped     int
	}{
		{"the shared traces' own extra columns are no misspelling",
			common + ",cluster,synth_model_name,synth_num_iteration,synth_batch_size,synth_deadline_s,gpu_milli,cpu_milli,memory_mib,qos,queue_s,creation_time,scheduled_time,deletion_time,vc,submit_timestamp,gpu_time_s\n",
			nil, 0},
		{"the optional columns spelt right are read, not reported",
			common + ",logical_workers,min_gpus,max_gpus,determinism,speeds\na,0,10,2,,Pass,1,4,1,4,d2,\n", nil, 0},
		{"case, hyphens, spaces and a letter or two off are reported with the column meant",
			common + ",Min-GPUs,max gpus,logical_worker,determinsm,speed,Speeds\n",
			map[string]string{"Min-GPUs": "min_gpus", "max gpus": "max_gpus", "logical_worker": "logical_workers",
				"determinsm": "determinism", "speed": "speeds", "Speeds": "speeds"}, 0},
		{"rows with an empty duration_s are counted", common + "\na,0,,1,,Failed,1\nb,1,5,1,,Pass,1\nc,2,,1,,Killed,1\n", nil, 2},
		{"a column more than two edits from every optional one is no misspelling", "name,time,application,num_replicas,batch_size,minimum_gpus\n",
			nil, 0},
		{"a Pollux table's misspelt column", "name,time,application,num_replicas,batch_size,max_gpu\n",
			map[string]string{"max_gpu": "max_gpus"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, rep, err := ReadReport(strings.NewReader(tc.table))
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(rep.Misspelt, tc.misspelt) || rep.Skipped != tc.skipped {
				t.Errorf("report %+v, want misspelt %v and %d skipped", rep, tc.misspelt, tc.skipped)
			}
		})
	}
}
