# Builds /tmp/r34root (root) and /tmp/r34out (outside) used by the other scripts.
import os, shutil
shutil.rmtree("/tmp/r34root", ignore_errors=True); os.makedirs("/tmp/r34root"); os.makedirs("/tmp/r34out", exist_ok=True)
os.chdir("/tmp/r34root")
os.mkdir("deep"); os.chdir("deep")
for i in range(2040): os.mkdir("a"); os.chdir("a")
open("f","w").write("x"); os.chdir("/tmp/r34root")
with open("big","wb") as f: f.truncate(1<<40); f.seek(0); f.write(b"hello")
open("u8","wb").write(b"a"*10+"€".encode()*100000)
os.mkfifo("fifo")
open("target","w").write("T")
prev="target"
for i in range(39): os.symlink(prev, f"l{i}"); prev=f"l{i}"
n=800; mid="deep/"+"a/"*n+"../"*(n+1); prev="target"
for i in range(39): os.symlink(mid+prev, f"s{i}"); prev=f"s{i}"   # each link walks 1602 components
open("/tmp/r34out/secret","wb").write(b"O"*(1<<20)); open("inside","wb").write(b"I"*(1<<20))
