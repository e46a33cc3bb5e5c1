import { describe, expect, it } from 'vitest';
import { memoByObject, textMemo } from '../../src/core/text-memo.ts';

/** A build that counts its calls and throws on the text "bad". */
function counted() {
  const calls: string[] = [];
  const build = (text: string, source: string) => {
    calls.push(`${source}:${text}`);
    if (text === 'bad') throw new Error(`${source}: bad`);
    return { source, words: text.split(' ') };
  };
  return { calls, build };
}

describe('textMemo (the chip, graph and registry memo)', () => {
  it('builds once per (source, text); each hit is a copy the caller may mutate', () => {
    const { calls, build } = counted();
    const get = textMemo(4, build);
    const a = get('x y', 'f.yaml');
    a.words.push('mutated');
    const b = get('x y', 'f.yaml');
    expect(b).toEqual({ source: 'f.yaml', words: ['x', 'y'] });
    expect(b).not.toBe(get('x y', 'f.yaml'));
    expect(calls).toEqual(['f.yaml:x y']);
    // Another text or another source is another key: an edited file is built afresh.
    get('x y z', 'f.yaml');
    get('x y', 'g.yaml');
    expect(calls).toEqual(['f.yaml:x y', 'f.yaml:x y z', 'g.yaml:x y']);
  });

  it('keeps no failed build, and past max entries the oldest is built again', () => {
    const { calls, build } = counted();
    const get = textMemo(2, build);
    expect(() => get('bad', 'f.yaml')).toThrow('f.yaml: bad');
    expect(() => get('bad', 'f.yaml')).toThrow('f.yaml: bad');
    expect(calls).toEqual(['f.yaml:bad', 'f.yaml:bad']);
    get('1', 's');
    get('2', 's');
    get('3', 's'); // evicts '1'
    get('3', 's');
    get('1', 's');
    expect(calls.slice(2)).toEqual(['s:1', 's:2', 's:3', 's:1']);
  });
});

describe('memoByObject (derived data once per key object)', () => {
  it('computes once per key object, the same value each time; another object, even equal, computes again; a throw stores nothing', () => {
    const calls: number[][] = [];
    const sum = memoByObject((xs: number[]) => {
      calls.push(xs);
      if (xs.length === 0) throw new Error('empty');
      return { total: xs.reduce((a, b) => a + b, 0) };
    });
    const a = [1, 2, 3];
    const first = sum(a);
    expect(first).toEqual({ total: 6 });
    expect(sum(a)).toBe(first);
    expect(calls).toHaveLength(1);
    expect(sum([1, 2, 3])).not.toBe(first);
    expect(calls).toHaveLength(2);
    const empty: number[] = [];
    expect(() => sum(empty)).toThrow('empty');
    expect(() => sum(empty)).toThrow('empty');
    expect(calls).toHaveLength(4);
  });
});
