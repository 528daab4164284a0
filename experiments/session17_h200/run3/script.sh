# session 17 run3: Wan with NHWC upsamples in 16-byte units; the whole dispatch list
mkdir -p /tmp/r3
strata bench --no-cache --arch wan22 --frames 5 --size 704x1280 --reps 2 --warmup 1 --profile --profile-slowest 420 > /tmp/r3/wan5_profile.txt 2>&1
strata bench --no-cache --arch wan22 --frames 5 --size 704x1280 --reps 2 --warmup 1 --out /tmp/r3/wan5.npy > /tmp/r3/wan5.txt 2>&1
cd /tmp/r3 && tar czf $OUT/r3.tgz *.txt
grep -h "device-resident\|memory held" wan5_profile.txt wan5.txt | cut -c1-120
grep -A12 "by kernel kind" wan5_profile.txt | head -13
