// The Responses API (POST /v1/responses) through the official openai client's responses.create
// against `vireo serve` with the default model (random weights: only lengths, shapes and the
// grammar-constrained outputs are checked).
'use strict';
const { OpenAI, client, test, run, assert, assertEq, modelName } = require('./common');

let MODEL;

const WEATHER = {
  type: 'function', name: 'get_weather', description: 'Weather for a city', strict: true,
  parameters: { type: 'object', properties: { city: { enum: ['Paris', 'Rome'] } }, required: ['city'] },
};

function outputText(r) {
  return r.output.filter((o) => o.type === 'message').flatMap((o) => o.content).map((c) => c.text).join('');
}

test('setup', async () => { MODEL = await modelName(); });

test('plain: shape, usage, max_output_tokens -> incomplete', async () => {
  const r = await client.responses.create({ model: MODEL, input: 'The capital of France is', instructions: 'Be brief.',
    max_output_tokens: 6, temperature: 0, ignore_eos: true, metadata: { run: 'e2e' } });
  assert(r.id.startsWith('resp_'), 'id ' + r.id);
  assertEq(r.object, 'response', 'object');
  assertEq(r.status, 'incomplete', 'status');
  assertEq(r.incomplete_details, { reason: 'max_output_tokens' }, 'incomplete_details');
  assertEq(r.instructions, 'Be brief.', 'instructions echoed');
  assertEq(r.max_output_tokens, 6, 'max_output_tokens echoed');
  assertEq(r.metadata, { run: 'e2e' }, 'metadata echoed');
  assertEq(r.output.length, 1, 'one item');
  assertEq(r.output[0].type, 'message', 'message item');
  assertEq(r.output[0].role, 'assistant', 'role');
  assertEq(r.output[0].content[0].type, 'output_text', 'output_text');
  assertEq(r.output_text, outputText(r), 'the SDK\'s output_text');
  assertEq(r.usage.output_tokens, 6, 'output_tokens');
  assert(r.usage.input_tokens > 0, 'input_tokens');
  assertEq(r.usage.total_tokens, r.usage.input_tokens + 6, 'total_tokens');
  assertEq(r.usage.output_tokens_details.reasoning_tokens, 0, 'reasoning_tokens');
});

test('usage: cached_tokens counts the prefix-cache hits of a repeated prompt', async () => {
  const params = { model: MODEL, instructions: 'You are a helpful assistant. Answer in one short sentence, please.',
    input: 'Which river flows through Paris, and into which sea does it flow?', max_output_tokens: 2 };
  const first = await client.responses.create(params);
  assert(first.usage.input_tokens > 32, 'a prompt over two blocks: ' + first.usage.input_tokens);
  const again = await client.responses.create(params);
  assert(again.usage.input_tokens_details.cached_tokens >= 16, 'cached_tokens ' + JSON.stringify(again.usage));
});

test('streaming: event order, deltas concatenate to the final text', async () => {
  const params = { model: MODEL, input: [{ role: 'user', content: [{ type: 'input_text', text: 'Count:' }] }],
    max_output_tokens: 8, temperature: 0, ignore_eos: true };
  const plain = await client.responses.create(params);
  const stream = await client.responses.create({ ...params, stream: true });
  const types = [];
  let text = '', seq = -1, done = null, completed = null;
  for await (const e of stream) {
    assertEq(e.sequence_number, seq + 1, 'sequence_number');
    seq = e.sequence_number;
    if (types[types.length - 1] !== e.type) types.push(e.type);
    if (e.type === 'response.output_text.delta') text += e.delta;
    if (e.type === 'response.output_text.done') done = e.text;
    if (e.type === 'response.completed') completed = e.response;
  }
  assertEq(types, ['response.created', 'response.in_progress', 'response.output_item.added', 'response.content_part.added',
    'response.output_text.delta', 'response.output_text.done', 'response.content_part.done', 'response.output_item.done',
    'response.completed'], 'event order');
  assertEq(done, text, 'output_text.done');
  assertEq(outputText(completed), text, 'completed response text');
  assertEq(text, outputText(plain), 'greedy: stream equals plain');
  assertEq(completed.usage.output_tokens, 8, 'usage in response.completed');
  assertEq(completed.status, 'incomplete', 'status');
});

test('text.format json_schema: output_text parses as JSON', async () => {
  const schema = { type: 'object', properties: { answer: { enum: ['yes', 'no'] }, n: { type: 'integer', minimum: 0, maximum: 9 } },
    required: ['answer', 'n'] };
  const r = await client.responses.create({ model: MODEL, input: 'Answer in JSON.', temperature: 1, seed: 2, max_output_tokens: 200,
    text: { format: { type: 'json_schema', name: 'answer', schema, strict: true } } });
  assertEq(r.status, 'completed', 'status');
  const v = JSON.parse(r.output_text);
  assert(['yes', 'no'].includes(v.answer) && Number.isInteger(v.n), 'valid: ' + r.output_text);
  assertEq(r.text.format.type, 'json_schema', 'text echoed');
});

test('function tool with tool_choice required -> function_call items, then a round trip', async () => {
  const r = await client.responses.create({ model: MODEL, input: 'Weather in Paris?', tools: [WEATHER], tool_choice: 'required',
    temperature: 1, seed: 5, max_output_tokens: 200 });
  const calls = r.output.filter((o) => o.type === 'function_call');
  assert(calls.length >= 1, 'a function_call item: ' + JSON.stringify(r.output));
  for (const c of calls) {
    assertEq(c.name, 'get_weather', 'name');
    assert(c.call_id.startsWith('call_') && c.id.startsWith('fc_'), 'ids');
    assert(['Paris', 'Rome'].includes(JSON.parse(c.arguments).city), 'arguments ' + c.arguments);
  }
  const stream = await client.responses.create({ model: MODEL, input: 'Weather in Paris?', tools: [WEATHER], tool_choice: 'required',
    temperature: 1, seed: 5, max_output_tokens: 200, stream: true });
  const streamed = [];
  for await (const e of stream) if (e.type === 'response.output_item.done' && e.item.type === 'function_call') streamed.push(e.item);
  assertEq(streamed.map((c) => c.arguments), calls.map((c) => c.arguments), 'same seed, same calls streamed');
  const next = await client.responses.create({ model: MODEL, tools: [WEATHER], tool_choice: 'none', max_output_tokens: 4,
    input: [{ role: 'user', content: 'Weather in Paris?' }, ...r.output,
      ...calls.map((c) => ({ type: 'function_call_output', call_id: c.call_id, output: '{"temp": 21}' }))] });
  assertEq(next.output[0].type, 'message', 'the answer after the tool output');
});

test('previous_response_id continues the stored conversation; unknown ids are 404', async () => {
  const first = await client.responses.create({ model: MODEL, input: 'My name is Ada.', max_output_tokens: 3, temperature: 0 });
  const second = await client.responses.create({ model: MODEL, input: 'What is my name?', previous_response_id: first.id,
    max_output_tokens: 3, temperature: 0 });
  assertEq(second.previous_response_id, first.id, 'echoed');
  assert(second.usage.input_tokens > first.usage.input_tokens + 3, 'the earlier turn is in the prompt: ' +
    second.usage.input_tokens + ' vs ' + first.usage.input_tokens);
  try {
    await client.responses.create({ model: MODEL, input: 'x', previous_response_id: 'resp_unknown' });
    throw new Error('no error');
  } catch (e) {
    assert(e instanceof OpenAI.NotFoundError, 'NotFoundError, got ' + e);
  }
});

test('bad requests are OpenAI 400s', async () => {
  const expect400 = async (params, param) => {
    try {
      await client.responses.create({ model: MODEL, input: 'x', max_output_tokens: 3, ...params });
    } catch (e) {
      assert(e instanceof OpenAI.BadRequestError, 'BadRequestError, got ' + e);
      assertEq(e.status, 400, 'status');
      assertEq(e.param, param, 'param of ' + JSON.stringify(params));
      assertEq(e.error.type, 'BadRequestError', 'error.type');
      assert(typeof e.error.message === 'string' && e.error.message.length > 0, 'error.message');
      return;
    }
    throw new Error('no error for ' + JSON.stringify(params));
  };
  await expect400({ tools: [{ type: 'web_search_preview' }] }, 'tools');
  await expect400({ conversation: 'conv_123' }, 'conversation');
  await expect400({ input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'http://x/y.png' }] }] }, 'input');
  await expect400({ text: { format: { type: 'json_schema', name: 'x', schema: { type: 'strin' } } } }, 'text');
});

run();
