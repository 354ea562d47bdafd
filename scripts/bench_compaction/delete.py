"""Delete rows with chunk_id % MOD == 0 (default 50: 2 %, spread over every fragment)."""
import sys, time, lance
ds = lance.dataset(sys.argv[1])
mod = int(sys.argv[2]) if len(sys.argv) > 2 else 50
t = time.time()
ds.delete(f"chunk_id % {mod} = 0")
ds = lance.dataset(sys.argv[1])
print(f"deleted; {ds.count_rows()} live rows, {time.time()-t:.1f}s", flush=True)
