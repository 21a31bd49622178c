// The reference for `bench pickup`: BullMQ's pickup latency after idle gaps.
// A job added to an idle queue; the time until its worker's processor runs.
// Long gaps run several queues side by side (each with its own worker,
// staggered by half a second), as `bench pickup` runs several servers.
//
// usage: node bullmq_pickup.mjs --dir=BULLMQ_DIR --port=P
//            [--gaps=1,15,120] [--samples=20] [--budget=150]
// Prints one JSON line per gap.
import { createRequire } from 'node:module';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';

const options = { dir: '../shared/bench/bullmq', port: '6379', gaps: '1,15,120', samples: '20', budget: '150' };
for (const argument of process.argv.slice(2)) {
  const match = /^--([a-z]+)=(.*)$/.exec(argument);
  if (!match || !(match[1] in options)) throw new Error(`bad argument ${argument}`);
  options[match[1]] = match[2];
}
const require = createRequire(join(resolve(options.dir), 'package.json'));
const { Queue, Worker } = require('bullmq');
const connection = { host: '127.0.0.1', port: Number(options.port), maxRetriesPerRequest: null };
const sleep = (ms) => new Promise((settle) => setTimeout(settle, ms));

// One queue and its worker: a warm-up job, then `count` jobs `gapMs` apart.
async function lane(name, gapMs, count, offsetMs) {
  const queue = new Queue(name, { connection });
  let started = 0;
  let taken = () => {};
  const worker = new Worker(name, async () => { started = performance.now(); taken(); }, { connection, concurrency: 1 });
  await worker.waitUntilReady();
  const one = async () => {
    const done = new Promise((settle) => { taken = settle; });
    const pushed = performance.now();
    await queue.add('probe', {}, { removeOnComplete: true, removeOnFail: true });
    await done;
    return started - pushed;
  };
  await sleep(offsetMs);
  await one();
  const samples = [];
  for (let n = 0; n < count; n++) {
    await sleep(gapMs);
    samples.push(await one());
  }
  await worker.close();
  await queue.obliterate({ force: true });
  await queue.close();
  return samples;
}

const percentile = (sorted, p) => sorted[Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length))) - 1];
const wanted = Number(options.samples);
for (const gap of options.gaps.split(',').map(Number)) {
  const lanes = Math.min(wanted, Math.max(1, Math.ceil((wanted * gap) / Number(options.budget))));
  const perLane = Math.ceil(wanted / lanes);
  const runs = [];
  for (let n = 0; n < lanes; n++) {
    runs.push(lane(`pickup-${process.pid}-${gap}-${n}`, gap * 1000, perLane, n * 500));
  }
  const samples = (await Promise.all(runs)).flat().sort((a, b) => a - b);
  const round = (value) => Math.round(value * 10) / 10;
  console.log(JSON.stringify({
    system: 'bullmq',
    bullmq_version: require('bullmq/package.json').version,
    gap_s: gap,
    samples: samples.length,
    p50_ms: round(percentile(samples, 50)),
    p99_ms: round(percentile(samples, 99)),
    max_ms: round(samples[samples.length - 1]),
  }));
}
process.exit(0);
