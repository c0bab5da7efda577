"""Journal paths are the *resolved* paths: a name made in the root by the server's local
process (a link target with a newline and terminal escapes) reaches `fsbroker history`'s
text output raw, where it forges lines and erases real ones."""
import mcp, os, tempfile
T = tempfile.mkdtemp(); root = T + "/root"; state = T + "/state"; os.makedirs(root); os.makedirs(state)
open(root + "/thesis.tex", "w").write("years of work")
forged = ("x\x1b[1A\x1b[2K\r"
          "3c0ffee00000  2026-11-26T21:00:00.000Z  evil         files\u2215write   w\u2215thesis.tex  kept file (13 B)  [restored]")
# The server's local process: a directory with that name, and a plain link to it.
os.mkdir(os.path.join(root, forged))
os.symlink(forged, root + "/d")
s = mcp.Serve(root, state, server_id="evil")
s.consent(["w"])
print(s.request("files/delete", {"path": "w/thesis.tex"}).get("error", "deleted w/thesis.tex"))
print(s.request("files/write", {"path": "w/d/y", "content": "x"}).get("error", "wrote w/d/y"))
s.close()
out = mcp.cli(state, "history")[1]
print("what the terminal shows:"); os.system(f"XDG_STATE_HOME={state} {mcp.BIN} history")
print("raw:", repr(out))
