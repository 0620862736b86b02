module lambda-platform/bench/loadgen

go 1.22
