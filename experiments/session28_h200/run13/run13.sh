# session 28 run 13: cold and warm start with the plan format 7 (fresh caches, process wall time)
for b in strata; do [ -e .gpu/bin/$b ] || xz -dk .gpu/bin/$b.xz; done; chmod +x .gpu/bin/*
mkdir -p /tmp/r13/xdg /tmp/r13/glc; cd /tmp/r13
export XDG_CACHE_HOME=/tmp/r13/xdg __GL_SHADER_DISK_CACHE_PATH=/tmp/r13/glc
for k in cold warm; do
  python3 -c "
import subprocess, time, sys
t = time.time(); r = subprocess.run(['strata','bench','--arch','flux','--size','1024','--warmup','0','--reps','1'], capture_output=True, text=True)
print('$k start: %.2f s (rc %d)' % (time.time() - t, r.returncode)); open('$k.txt','w').write(r.stdout + r.stderr)"
  grep -h "loaded on\|plan cache: entry\|pipelines" $k.txt | cut -c1-160 | head -3
done
tar czf $OUT/run13.tgz *.txt
