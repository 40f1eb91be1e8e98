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
        // SAFETY: `ptr` is an element of an array of `E` (above), so it is aligned to the element's size; the
        // element is read only where `in_bounds` holds (inside its array), after the array's token.
        let (x, _): (Tile<E, { [] }>, Token) = unsafe {
            let aligned: PointerTile<*mut E, { [] }> = assume_div_by::<_, ALIGN>(ptr);
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

    /// `ct.gather` of a tile: the elements at `ptrs`, `pad` where `in_bounds` is false, after the array's
    /// `token`.
    ///
    /// Only this module's entries call it, each with pointers into one of its own arrays at indices that
    /// `in_bounds` checks against that array's extents, and the array's ordering `token`.
    #[cuda_tile::variadic_op(N = 6)]
    fn gather_tile<E: ElementType, const S: [i32; N]>(
        ptrs: PointerTile<*mut E, S>, in_bounds: Tile<bool, S>, pad: Tile<E, S>, token: Token,
    ) -> Tile<E, S> {
        // SAFETY: each element is read only where `in_bounds` holds, so inside its array, after its token.
        let (x, _): (Tile<E, S>, Token) = unsafe {
            load_ptr_tko_tpad(
                ptrs,
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

    /// `ct.scatter` of a tile: `value` written at `ptrs` where `in_bounds` holds, after the array's `token`;
    /// returns the store's token.
    ///
    /// Only this module's entries call it, each with pointers into one of its own outputs at indices that
    /// `in_bounds` checks against that output's extents, and the output's ordering `token`; the tile blocks
    /// of a launch write disjoint elements, as cuTile Python's contract asks of `ct.scatter`.
    #[cuda_tile::variadic_op(N = 6)]
    fn scatter_tile<E: ElementType, const S: [i32; N]>(
        ptrs: PointerTile<*mut E, S>, value: Tile<E, S>, in_bounds: Tile<bool, S>, token: Token,
    ) -> Token {
        // SAFETY: each element is written only where `in_bounds` holds, so inside its output, after the
        // output's token, and by one tile block, as above.
        let done: Token = unsafe {
            store_ptr_tko(
                ptrs,
                value,
                ordering::Weak,
                None::<scope::TileBlock>,
                Some(in_bounds),
                Some(token),
                Latency::<0>,
            )
        };
        done
    }
