// Device functions of the idiomatic rendering (tileport.emit.rust.idiom) private to one kernel module, read by
// tileport.emit.rust.lowering (MODULE_FNS): a module file holds the ones its entries call, once, before them.
// Each is private because its safety rests on how the module's entries call it. One blank line separates them;
// none holds a blank line.

    /// `ct.gather` of one element: the element at `ptr`, or `pad` where `in_bounds` is false; `ptr` is
    /// `ALIGN`-byte aligned (the element's size, as cuTile Python states it for a single-element access).
    ///
    /// Only this module's entries call it, each with a pointer into one of its own arrays at an index that
    /// `in_bounds` checks against that array's extent, and the array's ordering `token`.
    fn load_element<E: ElementType, const ALIGN: i32>(
        ptr: PointerTile<*mut E, { [] }>,
        in_bounds: Tile<bool, { [] }>,
        pad: Tile<E, { [] }>,
        token: Token,
    ) -> Tile<E, { [] }> {
        // SAFETY: `ptr` is an element of an array of `E` (above), so it is aligned to the element's size.
        let aligned: PointerTile<*mut E, { [] }> = unsafe { assume_div_by::<_, ALIGN>(ptr) };
        // SAFETY: the element is read only where `in_bounds` holds (inside its array), after the array's token.
        let (x, _): (Tile<E, { [] }>, Token) = unsafe {
            load_ptr_tko_tpad(
                aligned,
                ordering::Weak,
                None::<scope::TileBlock>,
                Some(in_bounds),
                Some(pad),
                Some(token),
                Latency::<0>,
            )
        };
        x
    }
