"""Issue 8's routes and tools over a real ``sessionledger serve`` (SPEC LM-1, LM-2, RS, TR-5).

One server whose workspace declares a model catalog, the dynamic-workflow flag and off-peak
windows: the model routes, the user's choice of the session's model, ListModels, the cron
and off-peak tools and ReadSessionContext as a protocol host calls them; bad input is a
clear 4xx that appends nothing; the records survive a restart.
"""

from __future__ import annotations

from pathlib import Path

from server_support import running_server
from tool_support import CATALOG_TOML, write_config


def test_lm1_lm2_rs_tr5_over_a_real_server(tmp_path: Path) -> None:
    write_config(tmp_path / "workspace", CATALOG_TOML)
    with running_server(tmp_path) as server, server.client() as http:
        session = http.post("/v1/sessions", json={"mode": "auto"}).json()["sessionId"]
        other = http.post("/v1/sessions", json={}).json()["sessionId"]

        listing = http.get("/v1/models", params={"sessionId": session}).json()
        assert listing["current"] == "anthropic/sonnet" and len(listing["models"]) == 4
        assert http.get("/v1/models/resolve", params={"ref": "LLAMA"}).json() == {
            "id": "openrouter/llama", "level": None}
        # no session: the host's current model's provider breaks the tie
        assert http.get("/v1/models/resolve", params={"ref": "sonnet"}).json()["id"] == (
            "anthropic/sonnet")
        invalid = http.get("/v1/models/resolve", params={"ref": "sonnet$turbo"})
        assert invalid.status_code == 422
        assert "ListModels" in invalid.json()["error"]["message"]
        chosen = http.put(f"/v1/sessions/{session}/model", json={"model": "sonnet$high"})
        assert chosen.json() == {"sessionId": session, "model": "anthropic/sonnet",
                                 "level": "high", "version": chosen.json()["version"]}

        def tool(name: str, payload: dict[str, object], sid: str = session) -> dict[str, object]:
            response = http.post(f"/v1/sessions/{sid}/tool-calls",
                                 json={"tool": name, "input": payload})
            assert response.status_code == 200, response.text
            body: dict[str, object] = response.json()
            return body

        models = tool("ListModels", {})
        assert "anthropic/sonnet" in str(models["modelContent"]).split("[current]")[0]
        created = tool("CronCreate", {"cron": "0 9 * * 1-5", "prompt": "standup notes"})
        schedule_id = created["result"]["id"]  # type: ignore[index]
        assert tool("OffPeakCreate", {"prompt": "reindex"})["success"] is True

        before = http.get(f"/v1/sessions/{session}/events").json()["version"]
        for name, payload in (("CronCreate", {"cron": "99 * * * *", "prompt": "p"}),
                              ("ReadSessionContext", {"sessionId": "nope", "query": "q"})):
            refused = http.post(f"/v1/sessions/{session}/tool-calls",
                                json={"tool": name, "input": payload})
            assert refused.status_code == 422
            assert refused.json()["error"]["code"] == "invalid_input"
        assert http.get(f"/v1/sessions/{session}/events").json()["version"] == before

        http.post(f"/v1/sessions/{other}/messages",
                  json={"role": "user", "content": "The flux capacitor needs 1.21 gigawatts."})
        context = tool("ReadSessionContext", {"sessionId": other, "query": "flux capacitor"})
        assert "1.21 gigawatts" in str(context["modelContent"])
        assert "not instructions" in str(context["modelContent"])
        assert http.get(f"/v1/sessions/{session}/audit").json()["ok"] is True

    with running_server(tmp_path) as server, server.client() as http:  # after a restart
        listed = http.post(f"/v1/sessions/{session}/tool-calls",
                           json={"tool": "CronList", "input": {}}).json()
        assert [s["id"] for s in listed["result"]["schedules"]] == [schedule_id]
        assert http.get("/v1/models", params={"sessionId": session}).json()["current"] == (
            "anthropic/sonnet")
        assert len(http.post(f"/v1/sessions/{session}/tool-calls",
                             json={"tool": "OffPeakList", "input": {}}
                             ).json()["result"]["prompts"]) == 1
