/**
 * A Map that holds at most `limit` entries and forgets the oldest first:
 * what lets `fix` keep the message ids it must know about in flat memory on
 * a stream of any length (`check` uses no limit).
 */
export class Recent<K, V> extends Map<K, V> {
  constructor(private readonly limit = Infinity) {
    super();
  }

  override set(key: K, value: V): this {
    if (this.size >= this.limit && !this.has(key)) {
      const oldest = this.keys().next();
      if (!oldest.done) this.delete(oldest.value);
    }
    return super.set(key, value);
  }
}
