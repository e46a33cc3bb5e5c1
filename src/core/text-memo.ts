/**
 * A per-process memo for a pure build from a file's text: a catalog chip, a model graph, a registry's
 * coefficient sets. Each build parses YAML and checks a schema (≈ 3 ms a chip, 10–20 ms a graph,
 * ≈ 150 ms a 230 kB registry, CPU on the 2-core machine), and one process builds the same file many
 * times (validation and serving set up a pricer per deployment; the test suite per case).
 */

/**
 * Memoise `build(text, source)` on (source, text): a hit returns a `structuredClone` of the stored
 * value (the values are plain data, so a caller may mutate what it gets), and the key holds the text,
 * so an edited file is built afresh. Only successful builds are kept (a throw stores nothing); past
 * `max` entries the oldest goes.
 * @param max the most entries kept (count)
 * @returns the memoised build; it throws whatever `build` throws.
 */
export function textMemo<T>(
  max: number,
  build: (text: string, source: string) => T,
): (text: string, source: string) => T {
  const built = new Map<string, T>();
  return (text, source) => {
    const key = `${source}\n${text}`;
    const hit = built.get(key);
    if (hit !== undefined) return structuredClone(hit);
    const value = build(text, source);
    if (built.size >= max) built.delete(built.keys().next().value!);
    built.set(key, structuredClone(value));
    return value;
  };
}

/**
 * Memoise a pure `compute(key)` per key object (a WeakMap: an entry lives as long as its key). For
 * derived data computed once per rows array or per fitted object that several callers read (the GEMM
 * and HBM fitters reducing the same rows, validation regrouping one priced set's notes). The caller
 * must not mutate the key's contents after the first call, or the memo goes stale.
 * @returns the memoised function; it throws whatever `compute` throws (a throw stores nothing).
 */
export function memoByObject<K extends object, V>(compute: (key: K) => V): (key: K) => V {
  const memo = new WeakMap<K, V>();
  return (key) => {
    if (memo.has(key)) return memo.get(key)!;
    const value = compute(key);
    memo.set(key, value);
    return value;
  };
}
