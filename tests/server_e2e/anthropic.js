// Anthropic's Messages API (POST /v1/messages) through the official @anthropic-ai/sdk client against
// `vireo serve` with the default model (random weights: only shapes, lengths, greedy agreement and the
// grammar-constrained tool inputs are checked).
'use strict';
const path = require('path');
const { BASE, client: openai, test, run, assert, assertEq, modelName } = require('./common');
const Anthropic = require(path.join(__dirname, '../../tools/npm/node_modules/@anthropic-ai/sdk')).default;

const client = new Anthropic({ baseURL: BASE, apiKey: 'none', maxRetries: 0, timeout: 120000 });
let MODEL;

const WEATHER = {
  name: 'get_weather', description: 'Weather for a city',
  input_schema: { type: 'object', properties: { city: { enum: ['Paris', 'Rome'] } }, required: ['city'] },
};
const USER = [{ role: 'user', content: 'The capital of France is' }];

function text(m) { return m.content.filter((b) => b.type === 'text').map((b) => b.text).join(''); }

test('setup', async () => { MODEL = await modelName(); });

test('messages.create: shape and usage; countTokens agrees with input_tokens', async () => {
  const m = await client.messages.create({ model: MODEL, max_tokens: 6, system: 'Be brief.', messages: USER,
    temperature: 0, ignore_eos: true });
  assert(m.id.startsWith('msg_'), 'id ' + m.id);
  assertEq([m.type, m.role, m.model], ['message', 'assistant', MODEL], 'type, role, model');
  assertEq(m.stop_reason, 'max_tokens', 'stop_reason');
  assertEq(m.stop_sequence, null, 'stop_sequence');
  assertEq(m.content.map((b) => b.type), ['text'], 'one text block');
  assertEq(m.usage.output_tokens, 6, 'output_tokens');
  const counted = await client.messages.countTokens({ model: MODEL, system: 'Be brief.', messages: USER });
  assertEq(counted.input_tokens, m.usage.input_tokens, 'countTokens');
});

test('messages.stream: the events build the same greedy message; text events concatenate to it', async () => {
  const params = { model: MODEL, max_tokens: 12, messages: USER, temperature: 0, ignore_eos: true };
  const plain = await client.messages.create(params);
  const stream = client.messages.stream(params);
  let deltas = '';
  const kinds = [];
  stream.on('text', (t) => { deltas += t; });
  stream.on('streamEvent', (e) => { if (kinds[kinds.length - 1] !== e.type) kinds.push(e.type); });
  const final = await stream.finalMessage();
  assertEq(kinds, ['message_start', 'content_block_start', 'content_block_delta', 'content_block_stop', 'message_delta',
    'message_stop'], 'event order');
  assertEq(final.content, plain.content, 'content');
  assertEq(deltas, text(plain), 'text deltas');
  assertEq([final.stop_reason, final.usage.output_tokens], ['max_tokens', 12], 'stop_reason, output_tokens');
  assertEq(final.usage.input_tokens, plain.usage.input_tokens, 'input_tokens');
});

test('stop_sequences: stop_reason stop_sequence, the text up to it', async () => {
  const params = { model: MODEL, max_tokens: 16, messages: USER, temperature: 0, ignore_eos: true };
  const full = text(await client.messages.create(params));
  let k = Math.floor(full.length / 2);
  while (k < full.length - 1 && !full[k].trim()) k++;  // a visible character
  const seq = full[k];
  const m = await client.messages.create({ ...params, stop_sequences: [seq] });
  assertEq(m.stop_reason, 'stop_sequence', 'stop_reason');
  assertEq(m.stop_sequence, seq, 'stop_sequence');
  assertEq(text(m), full.slice(0, full.indexOf(seq)), 'text before the sequence');
});

test('tool_choice tool / any: tool_use blocks with schema-valid input (plain and streamed), then a tool_result turn', async () => {
  const m = await client.messages.create({ model: MODEL, max_tokens: 64, messages: [{ role: 'user', content: 'Weather?' }],
    tools: [WEATHER], tool_choice: { type: 'tool', name: 'get_weather' } });
  const use = m.content.find((b) => b.type === 'tool_use');
  assert(use, 'a tool_use block: ' + JSON.stringify(m.content));
  assertEq(use.name, 'get_weather', 'name');
  assert(['Paris', 'Rome'].includes(use.input.city), 'input ' + JSON.stringify(use.input));
  assert(use.id.startsWith('toolu_'), 'id ' + use.id);
  assertEq(m.stop_reason, 'tool_use', 'stop_reason');

  // A random model pads the grammar's whitespace: room for it, one call.
  const final = await client.messages.stream({ model: MODEL, max_tokens: 400, messages: [{ role: 'user', content: 'Weather?' }],
    tools: [WEATHER], tool_choice: { type: 'any', disable_parallel_tool_use: true }, temperature: 0 }).finalMessage();
  const streamed = final.content.find((b) => b.type === 'tool_use');
  assert(streamed && ['Paris', 'Rome'].includes(streamed.input.city), 'streamed input ' + JSON.stringify(final.content));
  assertEq(final.stop_reason, 'tool_use', 'streamed stop_reason');

  const next = await client.messages.create({ model: MODEL, max_tokens: 4, tools: [WEATHER], tool_choice: { type: 'none' },
    messages: [{ role: 'user', content: 'Weather?' }, { role: 'assistant', content: m.content },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: 'Sunny, 21 C' }] }] });
  assertEq(next.type, 'message', 'the tool_result turn is answered');
});

test('a final assistant message is a prefill: the answer continues it (chat\'s continue_final_message)', async () => {
  const messages = [{ role: 'user', content: 'Name a city.' }, { role: 'assistant', content: 'The city is' }];
  const m = await client.messages.create({ model: MODEL, max_tokens: 6, messages, temperature: 0, ignore_eos: true });
  const chat = await openai.chat.completions.create({ model: MODEL, max_tokens: 6, messages, temperature: 0, ignore_eos: true,
    continue_final_message: true, add_generation_prompt: false });
  assertEq(text(m), chat.choices[0].message.content, 'continuation');
  assertEq(m.usage.input_tokens, chat.usage.prompt_tokens, 'prompt tokens');
});

test('thinking disabled renders Qwen3\'s empty think block into the prompt', async () => {
  const on = await client.messages.create({ model: MODEL, max_tokens: 1, messages: USER, thinking: { type: 'enabled', budget_tokens: 1024 } });
  const off = await client.messages.create({ model: MODEL, max_tokens: 1, messages: USER, thinking: { type: 'disabled' } });
  assert(off.usage.input_tokens > on.usage.input_tokens, `input_tokens ${off.usage.input_tokens} > ${on.usage.input_tokens}`);
});

test('errors: the SDK\'s typed errors with Anthropic\'s envelope; the server stays healthy', async () => {
  const cases = [
    [{ model: MODEL, messages: USER }, Anthropic.BadRequestError, 400],
    [{ model: MODEL, max_tokens: 4, messages: [] }, Anthropic.BadRequestError, 400],
    [{ model: MODEL, max_tokens: 4, messages: [{ role: 'user', content: [{ type: 'document', source: {} }] }] }, Anthropic.BadRequestError, 400],
    [{ model: 'claude-opus-4-1', max_tokens: 4, messages: USER }, Anthropic.NotFoundError, 404],
    [{ model: MODEL, max_tokens: 1e7, messages: USER }, Anthropic.BadRequestError, 400],
  ];
  for (const [params, type, status] of cases) {
    let err = null;
    try { await client.messages.create(params); } catch (e) { err = e; }
    assert(err instanceof type, `${JSON.stringify(params).slice(0, 80)}: ${err}`);
    assertEq(err.status, status, 'status');
    assertEq(err.error.type, 'error', 'envelope');
    assert(typeof err.error.error.message === 'string' && err.error.error.type, 'error.type and message');
  }
  const ok = await client.messages.create({ model: MODEL, max_tokens: 2, messages: USER });
  assertEq(ok.usage.output_tokens > 0, true, 'healthy after errors');
});

test('8 concurrent greedy streams equal the same requests run alone', async () => {
  const prompts = Array.from({ length: 8 }, (_, i) => [{ role: 'user', content: `Count to ${i + 3}.` }]);
  const params = (messages) => ({ model: MODEL, max_tokens: 10, messages, temperature: 0, ignore_eos: true });
  const alone = [];
  for (const p of prompts) alone.push(text(await client.messages.create(params(p))));
  const together = await Promise.all(prompts.map((p) => client.messages.stream(params(p)).finalMessage()));
  assertEq(together.map(text), alone, 'texts');
});

run();
