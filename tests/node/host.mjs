#!/usr/bin/env node
// A small MCP host on the TypeScript SDK v2 client (@modelcontextprotocol/client), for the
// tests in tests/test_mcp_clients.py and later ones.
//
//   node host.mjs SCENARIO_JSON        (or "-" to read the scenario from stdin)
//
// The scenario is one JSON object:
//   connect:     {"url": "http://127.0.0.1:PORT/mcp"}
//                or {"command": "sessionledger", "args": [...], "cwd": "...", "env": {...}}
//                (a stdio child inherits this process's environment, plus env)
//   era:         "legacy" (the SDK's default: the 2025 initialize handshake), "auto" (probe
//                server/discover, fall back to initialize) or a pinned modern version such as
//                "2026-07-28"; absent = the client's default
//   elicitation: absent = the capability is not declared; else a list of replies used in
//                order, each {"action": "accept"|"decline"|"cancel", "content": {...},
//                "delayMs": N} or {"hold": true} (keep the form open until it is withdrawn)
//   steps:       a list, run in order, of
//                {"list": "tools"}
//                {"tool": NAME, "arguments": {...},
//                 "withSession": true,            add "sessionId": the last session seen
//                 "timeoutMs": N,                 RequestOptions.timeout
//                 "resetTimeoutOnProgress": true, RequestOptions.resetTimeoutOnProgress
//                 "maxTotalTimeoutMs": N,         RequestOptions.maxTotalTimeout
//                 "progress": true,               ask for progress (onprogress)
//                 "abortAfterProgress": N,        abort (AbortSignal) after N progress notices
//                 "abortOnStdin": true}           abort when a line "abort" arrives on stdin
//
// Output, one JSON object a line on stdout, flushed as it happens:
//   {"event": "connected", "era": ..., "protocolVersion": ..., "serverInfo": {...}}
//   {"event": "progress", "step": i, "progress": ..., "total": ..., "message": ...}
//   {"event": "elicitation", "step": i, "message": ..., "requestedSchema": {...}}
//   {"event": "withdrawn", "step": i}               (a held form the server withdrew)
//   {"event": "result", "step": i, "ok": true, "sessionId": ..., "result": {...}}
//   {"event": "result", "step": i, "ok": false, "error": {"name", "code", "message"}}
//   {"event": "done"}
// A failure to connect prints {"event": "error", ...} and exits 1; a failed step does not
// stop the scenario.

import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";

const SESSION_META = "sessionledger/sessionId";

function emit(event) {
  process.stdout.write(`${JSON.stringify(event)}\n`);
}

function describe(error) {
  return {
    name: error?.name ?? typeof error,
    code: error?.code ?? null,
    message: String(error?.message ?? error),
  };
}

function readScenario(argument) {
  if (argument === undefined) {
    throw new Error("usage: host.mjs SCENARIO_JSON (or - for stdin)");
  }
  const text = argument === "-" ? readFileSync(0, "utf8") : argument;
  return JSON.parse(text);
}

function transportFor(connect) {
  if (connect.url) {
    return new StreamableHTTPClientTransport(new URL(connect.url));
  }
  const env = Object.fromEntries(
    Object.entries({ ...process.env, ...(connect.env ?? {}) }).filter(([, v]) => v !== undefined),
  );
  return new StdioClientTransport({
    command: connect.command,
    args: connect.args ?? [],
    cwd: connect.cwd,
    env,
    stderr: "inherit",
  });
}

function clientOptions(scenario) {
  const options = {};
  if (scenario.elicitation) {
    options.capabilities = { elicitation: { form: {} } };
  }
  if (scenario.era === "legacy" || scenario.era === "auto") {
    options.versionNegotiation = { mode: scenario.era };
  } else if (scenario.era) {
    options.versionNegotiation = { mode: { pin: scenario.era } };
  }
  return options;
}

function sessionOf(result) {
  return result?._meta?.[SESSION_META] ?? result?.structuredContent?.sessionId ?? null;
}

function sleep(ms, signal) {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => {
      clearTimeout(timer);
      resolve();
    });
  });
}

async function main() {
  const scenario = readScenario(process.argv[2]);
  const state = { step: -1, sessionId: null, abort: null };
  const replies = [...(scenario.elicitation ?? [])];

  if (scenario.steps?.some((step) => step.abortOnStdin)) {
    const lines = createInterface({ input: process.stdin });
    lines.on("line", (line) => {
      if (line.trim() === "abort") state.abort?.abort(new Error("aborted by the test"));
    });
  }

  const client = new Client({ name: "sessionledger-test-host", version: "0.0.0" }, clientOptions(scenario));
  if (scenario.elicitation) {
    client.setRequestHandler("elicitation/create", async (request, ctx) => {
      const params = request.params ?? {};
      emit({
        event: "elicitation", step: state.step, message: params.message ?? null,
        requestedSchema: params.requestedSchema ?? null,
      });
      const reply = replies.shift() ?? { action: "cancel" };
      if (reply.hold) {
        await new Promise((resolve) => {
          if (ctx.mcpReq.signal.aborted) resolve();
          ctx.mcpReq.signal.addEventListener("abort", resolve);
        });
        emit({ event: "withdrawn", step: state.step });
        return { action: "cancel" };
      }
      if (reply.delayMs) await sleep(reply.delayMs, ctx.mcpReq.signal);
      return reply.content === undefined
        ? { action: reply.action }
        : { action: reply.action, content: reply.content };
    });
  }

  try {
    await client.connect(transportFor(scenario.connect));
  } catch (error) {
    emit({ event: "error", error: describe(error) });
    process.exitCode = 1;
    return;
  }
  emit({
    event: "connected", era: client.getProtocolEra() ?? null,
    protocolVersion: client.getNegotiatedProtocolVersion() ?? null,
    serverInfo: client.getServerVersion() ?? null,
  });

  for (const [index, step] of (scenario.steps ?? []).entries()) {
    state.step = index;
    try {
      if (step.list === "tools") {
        const listed = await client.listTools();
        emit({ event: "result", step: index, ok: true, sessionId: null, result: listed });
        continue;
      }
      const args = { ...(step.arguments ?? {}) };
      if (step.withSession && state.sessionId) args.sessionId = state.sessionId;
      const options = {};
      if (step.timeoutMs !== undefined) options.timeout = step.timeoutMs;
      if (step.resetTimeoutOnProgress) options.resetTimeoutOnProgress = true;
      if (step.maxTotalTimeoutMs !== undefined) options.maxTotalTimeout = step.maxTotalTimeoutMs;
      const controller = new AbortController();
      state.abort = controller;
      options.signal = controller.signal;
      let notices = 0;
      if (step.progress || step.resetTimeoutOnProgress || step.abortAfterProgress) {
        options.onprogress = (progress) => {
          notices += 1;
          emit({ event: "progress", step: index, ...progress });
          if (step.abortAfterProgress && notices >= step.abortAfterProgress) {
            controller.abort(new Error("aborted after progress"));
          }
        };
      }
      const result = await client.callTool({ name: step.tool, arguments: args }, options);
      const sessionId = sessionOf(result);
      if (sessionId) state.sessionId = sessionId;
      emit({ event: "result", step: index, ok: true, sessionId, result });
    } catch (error) {
      emit({ event: "result", step: index, ok: false, error: describe(error) });
    } finally {
      state.abort = null;
    }
  }
  await client.close();
  emit({ event: "done" });
}

main().then(
  () => process.exit(process.exitCode ?? 0),
  (error) => {
    emit({ event: "error", error: describe(error) });
    process.exit(1);
  },
);
