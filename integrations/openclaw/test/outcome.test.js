// What counts as a run's measured outcome, from agent_end's event as OpenClaw
// 2026.9.6 sends it (see measuredOutcome in src/settlement.js).

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { measuredOutcome, outcomeDetail } from "../src/settlement.js";

const user = { role: "user", content: [{ type: "text", text: "deploy it" }] };

describe("measuredOutcome", () => {
  it("keeps a success whose last assistant message stopped normally", () => {
    const event = { success: true, durationMs: 5, messages: [user, { role: "assistant", stopReason: "stop", content: [] }] };
    assert.equal(measuredOutcome(event), event);
  });

  it("counts a run whose model call failed as failed, with the model's error", () => {
    const event = {
      success: true,
      durationMs: 5,
      messages: [
        user,
        { role: "assistant", stopReason: "toolUse", content: [] },
        { role: "toolResult", content: [] },
        { role: "assistant", stopReason: "error", errorMessage: "400 scripted failure", content: [] },
      ],
    };
    const out = measuredOutcome(event);
    assert.equal(out.success, false);
    assert.equal(out.error, "400 scripted failure");
    assert.match(outcomeDetail(out), /success=false .*error="400 scripted failure"/);
    assert.equal(event.success, true, "the host's event is not changed");
  });

  it("counts an aborted last reply as failed, and leaves explicit failures and odd events alone", () => {
    const aborted = measuredOutcome({ success: true, messages: [{ role: "assistant", stopReason: "aborted" }] });
    assert.equal(aborted.success, false);
    assert.match(aborted.error, /aborted/);
    const failed = { success: false, error: "exec failed", messages: [] };
    assert.equal(measuredOutcome(failed), failed);
    assert.equal(measuredOutcome(undefined), undefined);
    const noMessages = { success: true };
    assert.equal(measuredOutcome(noMessages), noMessages);
  });
});
