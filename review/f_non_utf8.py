"""A change made beneath a directory whose name is not UTF-8 (made by the server's local
process; reached through a link): what does the journal say, and where does restore put it?"""
import mcp, os, tempfile
T = tempfile.mkdtemp(); root = T + "/root"; state = T + "/state"; os.makedirs(root); os.makedirs(state)
os.mkdir(root.encode() + b"/caf\xe9")
open(root.encode() + b"/caf\xe9/data.txt", "w").write("user data")
os.symlink(b"caf\xe9", root.encode() + b"/d")
s = mcp.Serve(root, state, server_id="evil")
s.consent(["w"])
print(s.request("files/delete", {"path": "w/d/data.txt"}))
s.close()
print(mcp.cli(state, "history", "--json")[1])
print(mcp.cli(state, "undo", "--server", "evil"))
for dp, dn, fn in os.walk(root.encode()):
    print(dp, dn, fn)
