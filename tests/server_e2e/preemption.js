// Run against a server whose KV cache is too small for the batch: the scheduler must preempt,
// and every output must still equal the same request run alone.
'use strict';
const { client, test, run, assert, assertEq, metrics, metricValue, modelName, streamCompletionText } = require('./common');

test('preemption keeps outputs identical', async () => {
  const MODEL = await modelName();
  const prompts = ['The quick brown fox', 'In the beginning', 'import numpy as np', 'Dear Sir or Madam,'];
  const params = (p) => ({ model: MODEL, prompt: p, max_tokens: 48, temperature: 0, ignore_eos: true });
  const alone = [];
  for (const p of prompts) alone.push((await client.completions.create(params(p))).choices[0].text);
  const before = metricValue(await metrics(), 'vllm:num_preemptions_total');
  const jobs = [];
  for (let i = 0; i < 12; i++) {
    const p = prompts[i % prompts.length];
    jobs.push(i % 2 ? streamCompletionText(params(p)).then((r) => r.text)
                    : client.completions.create(params(p)).then((r) => r.choices[0].text));
  }
  const results = await Promise.all(jobs);
  results.forEach((t, i) => assertEq(t, alone[i % prompts.length], 'request ' + i));
  const m = await metrics();
  const preemptions = metricValue(m, 'vllm:num_preemptions_total') - before;
  assert(preemptions > 0, 'expected preemptions, got ' + preemptions);
  assertEq(metricValue(m, 'vllm:num_requests_running'), 0, 'running after');
});

run();
